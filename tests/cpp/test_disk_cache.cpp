// The one disk cache (codegen/jit/disk_cache.h): entries round-trip, record their key, and a
// load reads only a sound regular file of bounded size; anything else is a miss, removed.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

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

TEST_CASE("a payload stored in pieces is the entry of their concatenation", "[disk_cache]") {
  TempDir dir;
  DiskCache cache(dir.path.string(), ".e");
  const std::string head("meta\0", 5), text(100000, 'x'), tail = "arrays";
  const std::vector<std::string_view> pieces{head, "", text, tail};
  REQUIRE(cache.store(kA, pieces));
  const std::string whole = head + text + tail;
  CHECK(cache.load(kA) == whole);
  // Byte for byte the entry a single piece gives: the checksum covers the pieces in order.
  CHECK(read(cache.path(kA)) == knit::codegen::encode_entry(kA, whole));
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

namespace {

void age(const fs::path& p, int seconds) {  // sets the file's "last used" time `seconds` ago
  fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
}

struct CapEnv {  // KNIT_CACHE_MAX_MB for one test case
  explicit CapEnv(const char* mb) { ::setenv("KNIT_CACHE_MAX_MB", mb, 1); }
  ~CapEnv() { ::unsetenv("KNIT_CACHE_MAX_MB"); }
};

}  // namespace

TEST_CASE("the cache's size cap evicts least recently used files", "[disk_cache]") {
  TempDir dir;
  CapEnv cap("1");  // 1 MiB: three 400 KiB entries do not fit
  DiskCache objects((dir.path / "objects").string(), ".o"), programs((dir.path / "programs").string(), ".knp");
  const std::string kC(64, 'c'), big(400 << 10, 'x');
  REQUIRE(objects.store(kA, big));
  REQUIRE(programs.store(kB, big));
  age(objects.path(kA), 30);
  age(programs.path(kB), 20);
  write(dir.path / "objects" / "notes.txt", std::string(2 << 20, 'n'));  // not Knit's: never counted
  const fs::path old_temp = dir.path / "objects" / (kC + ".o.tmp.1.0"),
                 new_temp = dir.path / "objects" / (kB + ".o.tmp.2.0");
  write(old_temp, "abandoned");
  write(new_temp, "in progress");
  age(old_temp, 2 * 3600);
  CHECK(knit::codegen::cache_files(dir.path.string()).size() == 4);
  CHECK(objects.load(kA) == big);   // used now: kB is the least recently used
  REQUIRE(objects.store(kC, big));  // 1.2 MiB: over the cap
  CHECK(fs::exists(objects.path(kA)));
  CHECK(fs::exists(objects.path(kC)));
  CHECK_FALSE(fs::exists(programs.path(kB)));
  CHECK_FALSE(fs::exists(old_temp));  // before any entry in use
  CHECK(fs::exists(new_temp));        // another process's write in progress
  CHECK(fs::exists(dir.path / "objects" / "notes.txt"));
  uint64_t total = 0;
  for (const auto& f : knit::codegen::cache_files(dir.path.string())) total += f.bytes;
  CHECK(total <= (1u << 20));
}

TEST_CASE("the cache's size cap comes from KNIT_CACHE_MAX_MB", "[disk_cache]") {
  CHECK(knit::codegen::cache_size_cap() == knit::codegen::kDefaultCacheMaxMB << 20);
  {
    CapEnv cap("0");
    CHECK(knit::codegen::cache_size_cap() == 0);  // no cap
  }
  {
    CapEnv cap("3");
    CHECK(knit::codegen::cache_size_cap() == 3u << 20);
  }
  for (const char* bad : {"-1", "1.5", "lots", "99999999999999999999"}) {
    CapEnv cap(bad);
    CHECK(knit::codegen::cache_size_cap() == knit::codegen::kDefaultCacheMaxMB << 20);
  }
  CHECK(knit::codegen::is_cache_file_name(kA + ".knp"));
  CHECK(knit::codegen::is_cache_file_name(kA + ".pch.tmp.12"));
  CHECK_FALSE(knit::codegen::is_cache_file_name(kA + ".txt"));
  CHECK_FALSE(knit::codegen::is_cache_file_name(std::string(64, 'A') + ".o"));
  CHECK_FALSE(knit::codegen::is_cache_file_name("notes.o"));
}
