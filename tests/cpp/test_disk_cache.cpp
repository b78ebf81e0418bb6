// The one disk cache (codegen/jit/disk_cache.h): entries round-trip, record their key, and a
// load reads only a sound regular file of bounded size; anything else is a miss, removed.
#include <chrono>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "knit/jit/disk_cache.h"

using knit::codegen::DiskCache;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("knit-disk-cache-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

const std::string kA(64, 'a'), kB(64, 'b');

}  // namespace

TEST_CASE("a disk cache entry round-trips and records its key", "[disk_cache]") {
  TempDir dir;
  DiskCache cache(dir.path.string(), ".e");
  CHECK_FALSE(cache.load(kA));  // missing: a plain miss
  CHECK(cache.rejected == 0);
  const std::string payload("object\0bytes\n", 13);
  REQUIRE(cache.store(kA, payload));
  CHECK(cache.contains(kA));
  CHECK(cache.load(kA) == payload);
  CHECK(cache.store(kB, ""));
  CHECK(cache.load(kB) == "");
  const std::string bytes = read(cache.path(kA));
  CHECK(bytes.starts_with("KNITENT1"));
  CHECK(bytes.find(kA) != std::string::npos);
  CHECK(knit::codegen::decode_entry(knit::codegen::encode_entry(kA, payload), kA) == payload);
  CHECK(cache.hits == 2);
  CHECK(cache.misses == 1);
  CHECK(cache.rejected == 0);
  for (const auto& e : fs::directory_iterator(dir.path))  // no temporary file left behind
    CHECK(e.path().extension() == ".e");
}

TEST_CASE("a swapped or copied disk cache entry is a miss and is removed", "[disk_cache]") {
  TempDir dir;
  DiskCache cache(dir.path.string(), ".e");
  REQUIRE(cache.store(kA, "payload of a"));
  REQUIRE(cache.store(kB, "payload of b"));
  const std::string a = read(cache.path(kA)), b = read(cache.path(kB));
  write(cache.path(kA), b);
  write(cache.path(kB), a);
  CHECK_FALSE(cache.load(kA));
  CHECK_FALSE(cache.load(kB));
  CHECK(cache.rejected == 2);
  CHECK_FALSE(fs::exists(cache.path(kA)));
  CHECK_FALSE(fs::exists(cache.path(kB)));
  std::string why;
  CHECK_FALSE(knit::codegen::decode_entry(a, kB, &why));
  CHECK(why == "it was written for another key (a swapped or copied entry)");
}

TEST_CASE("a truncated, flipped or foreign disk cache entry is a miss", "[disk_cache]") {
  TempDir dir;
  DiskCache cache(dir.path.string(), ".e");
  REQUIRE(cache.store(kA, "some payload bytes"));
  const std::string good = read(cache.path(kA));
  for (size_t n = 0; n < good.size(); ++n) CHECK_FALSE(knit::codegen::decode_entry(good.substr(0, n), kA));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x10;
    CHECK_FALSE(knit::codegen::decode_entry(bad, kA));
  }
  write(cache.path(kA), "KNITOBJ1 an entry of an older format");
  CHECK_FALSE(cache.load(kA));
  CHECK(cache.rejected == 1);
}

TEST_CASE("only regular files of bounded size are read", "[disk_cache]") {
  TempDir dir;
  DiskCache cache(dir.path.string(), ".e");
  const auto start = std::chrono::steady_clock::now();
  fs::create_symlink("/dev/zero", cache.path(kA));
  CHECK_FALSE(cache.contains(kA));
  CHECK_FALSE(cache.load(kA));
  CHECK_FALSE(fs::is_symlink(cache.path(kA)));  // the link is removed, /dev/zero is not
  CHECK(fs::exists("/dev/zero"));
  REQUIRE(::mkfifo(cache.path(kB).c_str(), 0600) == 0);
  CHECK_FALSE(cache.load(kB));  // would block forever if opened for reading as a file
  CHECK_FALSE(fs::exists(cache.path(kB)));
  const std::string big = std::string(64, 'c');
  {
    std::ofstream(cache.path(big)) << "x";
    fs::resize_file(cache.path(big), knit::codegen::kMaxEntryBytes + 1);  // sparse: costs no disk
  }
  CHECK_FALSE(cache.load(big));
  CHECK_FALSE(fs::exists(cache.path(big)));
  fs::create_directories(cache.path(kA));
  CHECK_FALSE(cache.load(kA));
  CHECK(cache.rejected == 4);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE(cache.store(kB, "after"));  // a rejected entry is rebuilt in its place
  CHECK(cache.load(kB) == "after");
}

TEST_CASE("a cache directory that cannot be written only loses the entry", "[disk_cache]") {
  TempDir dir;
  write(dir.path / "file", "not a directory");
  DiskCache cache((dir.path / "file" / "sub").string(), ".e");
  CHECK_FALSE(cache.store(kA, "x"));
  CHECK_FALSE(cache.load(kA));
  CHECK(cache.rejected == 0);
}
