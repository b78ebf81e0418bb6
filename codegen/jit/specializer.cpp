#include "knit/jit/specializer.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>

#include "knit/ir/error.h"
#include "knit/jit/object_cache.h"
#include "knit/jit/orc_jit.h"

namespace knit::codegen {

struct Specializer::Impl {
  std::string_view library;
  std::string library_hash;
  std::unique_ptr<DiskObjectCache> cache;  // null when caching is off
  std::string cache_dir;
  std::unique_ptr<OrcJit> jit;
  std::string triple, cpu, features;  // the host's, as its target machines see it
  std::map<std::pair<std::string, std::string>, SpecializedFn> done;
  std::atomic<int64_t> compiled = 0, from_cache = 0;  // modules built by LLVM / loaded from the disk cache
  std::mutex mutex;                                   // one compile() at a time (its groups run in parallel)

  std::unique_ptr<llvm::Module> load(llvm::LLVMContext& context) {
    auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(library.data(), library.size()), "knit-library",
                                                   /*RequiresNullTerminator=*/false);
    auto module = llvm::parseBitcodeFile(buffer->getMemBufferRef(), context);
    if (!module) internal_error("reading the native body library: " + llvm::toString(module.takeError()));
    return std::move(*module);
  }

  // A target machine for one compiling thread (they are not shared between threads).
  std::unique_ptr<llvm::TargetMachine> target_machine() const {
    auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!builder) internal_error("detecting the host CPU: " + llvm::toString(builder.takeError()));
    builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto made = builder->createTargetMachine();
    if (!made) internal_error("creating the host target machine: " + llvm::toString(made.takeError()));
    return std::move(*made);
  }

  // -O3 without loop unrolling and interleaving (bodies that need a loop unrolled ask with a
  // pragma): on attention's 27 shapes that compiles in ~200 ms instead of ~350 ms, and the
  // vectorized loops run as fast (docs/performance.md). Part of every cache key.
  static llvm::PipelineTuningOptions tuning() {
    llvm::PipelineTuningOptions t;
    t.LoopUnrolling = false;
    t.LoopInterleaving = false;
    return t;
  }
  static constexpr const char* kPipeline = "O3 unroll=0 interleave=0";

  // The pipeline above for the host, after dropping every library function no wrapper reaches.
  void optimize(llvm::Module& module, llvm::TargetMachine& target) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder builder(&target, tuning());
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager passes;
    passes.addPass(llvm::GlobalDCEPass());
    passes.addPass(builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3));
    passes.run(module, mam);
  }
};

Specializer::Specializer(std::string_view library) : impl_(std::make_unique<Impl>()) {
  impl_->library = library;
  impl_->library_hash = content_hash(llvm::StringRef(library.data(), library.size()));
  if (const std::string dir = knit::codegen::cache_directory(); !dir.empty()) {
    impl_->cache_dir = dir + "/objects";
    impl_->cache = std::make_unique<DiskObjectCache>(impl_->cache_dir);
  }
  impl_->jit = std::make_unique<OrcJit>(impl_->cache.get());
  const std::unique_ptr<llvm::TargetMachine> host = impl_->target_machine();
  impl_->triple = host->getTargetTriple().str();
  impl_->cpu = host->getTargetCPU().str();
  impl_->features = host->getTargetFeatureString().str();
}

Specializer::~Specializer() = default;

int knit_threads() {
  int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* env = std::getenv("KNIT_THREADS"); env && *env) n = std::max(1, std::atoi(env));
  return std::min(n, 64);
}

std::vector<std::vector<size_t>> Specializer::missing_groups(const std::vector<SpecializeRequest>& requests) const {
  std::vector<size_t> missing;
  for (size_t i = 0; i < requests.size(); ++i)
    if (!impl_->done.contains({requests[i].body, requests[i].constant})) missing.push_back(i);
  // LLVM optimizes and generates code for a module on one thread: dealing the requests round
  // robin into one module per core compiles a large batch about that many times faster. The
  // groups depend only on the requests and the thread count, so they hit the same cache entries.
  const size_t n_groups = std::min(missing.size(), static_cast<size_t>(knit_threads()));
  std::vector<std::vector<size_t>> groups(n_groups);
  for (size_t k = 0; k < missing.size(); ++k) groups[k % n_groups].push_back(missing[k]);
  return groups;
}

Specializer::Pending Specializer::pending(const std::vector<SpecializeRequest>& requests) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Pending p;
  for (const std::vector<size_t>& group : missing_groups(requests)) {
    if (impl_->cache && impl_->cache->contains(module_key(requests, group))) ++p.modules_to_load;
    else p.to_build.insert(p.to_build.end(), group.begin(), group.end());
  }
  return p;
}

std::vector<SpecializedFn> Specializer::compile(const std::vector<SpecializeRequest>& requests) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<SpecializedFn> out(requests.size(), nullptr);
  for (size_t i = 0; i < requests.size(); ++i)
    if (auto it = impl_->done.find({requests[i].body, requests[i].constant}); it != impl_->done.end())
      out[i] = it->second;
  const std::vector<std::vector<size_t>> groups = missing_groups(requests);
  if (groups.empty()) return out;
  const size_t n_groups = groups.size();
  std::vector<std::exception_ptr> failed(n_groups);
  auto run = [&](size_t g) {
    try {
      compile_group(requests, groups[g], out);
    } catch (...) {
      failed[g] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t g = 1; g < n_groups; ++g) threads.emplace_back(run, g);
  run(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  for (const std::vector<size_t>& group : groups)
    for (size_t i : group) impl_->done[{requests[i].body, requests[i].constant}] = out[i];
  return out;
}

// Everything the generated code depends on: Knit (and its cache entry format), the body library,
// LLVM, the host CPU and the requests themselves.
std::string Specializer::module_key(const std::vector<SpecializeRequest>& requests,
                                    const std::vector<size_t>& indices) const {
  std::string key_text = std::string("knit " KNIT_VERSION " ") + std::string(kEntryFormat) + "\n" +
                         impl_->library_hash + "\n" + host_description() + "\n" + Impl::kPipeline + "\n";
  for (size_t i : indices) {
    key_text += requests[i].body + "\n" + std::to_string(requests[i].constant.size()) + "\n";
    key_text += requests[i].constant;
  }
  return content_hash(key_text);
}

// One module (or its cached object) for requests[indices]; fills out[i] for each. Runs on its own
// thread beside the other groups: its own LLVM context and target machine, shared JIT and cache.
void Specializer::compile_group(const std::vector<SpecializeRequest>& requests, const std::vector<size_t>& missing,
                                std::vector<SpecializedFn>& out) {
  const std::string key = module_key(requests, missing);
  // The k-th wrapper's symbol: the same in a compiled module and in its cached object.
  auto wrapper_name = [&](size_t k) { return "knit_spec_" + key.substr(0, 24) + "_" + std::to_string(k); };
  auto finish = [&] {
    for (size_t k = 0; k < missing.size(); ++k)
      out[missing[k]] = reinterpret_cast<SpecializedFn>(impl_->jit->lookup(wrapper_name(k)));
  };
  if (impl_->cache)
    if (auto object = impl_->cache->load(key)) {
      ++impl_->from_cache;
      impl_->jit->add_object(std::move(object));
      return finish();
    }

  const std::unique_ptr<llvm::TargetMachine> target = impl_->target_machine();
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = impl_->load(*context);
  module->setTargetTriple(target->getTargetTriple().str());
  module->setDataLayout(target->createDataLayout());
  // The library was compiled for a generic CPU; its code runs on this one.
  for (llvm::Function& f : *module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", impl_->cpu);
    f.addFnAttr("target-features", impl_->features);
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
    f.setVisibility(llvm::GlobalValue::DefaultVisibility);
    f.setComdat(nullptr);
  }
  for (llvm::GlobalVariable& g : module->globals()) {
    if (g.isDeclaration()) continue;
    g.setLinkage(llvm::GlobalValue::InternalLinkage);
    g.setComdat(nullptr);
  }
  module->getComdatSymbolTable().clear();

  llvm::IRBuilder<> ir(*context);
  llvm::Type* ptr = ir.getPtrTy();
  for (size_t k = 0; k < missing.size(); ++k) {
    const SpecializeRequest& r = requests[missing[k]];
    llvm::Function* body = module->getFunction(r.body);
    if (!body || body->isDeclaration()) internal_error("the native body library has no function '" + r.body + "'");
    body->addFnAttr(llvm::Attribute::AlwaysInline);
    body->removeFnAttr(llvm::Attribute::NoInline);
    body->removeFnAttr(llvm::Attribute::OptimizeNone);
    auto* bytes = llvm::ConstantDataArray::getRaw(r.constant, r.constant.size(), ir.getInt8Ty());
    auto* shape = new llvm::GlobalVariable(*module, bytes->getType(), /*isConstant=*/true,
                                           llvm::GlobalValue::PrivateLinkage, bytes, "knit.shape");
    shape->setAlignment(llvm::Align(8));
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(ir.getVoidTy(), {ptr, ptr}, false),
                                      llvm::GlobalValue::ExternalLinkage, wrapper_name(k), *module);
    fn->addFnAttr("target-cpu", impl_->cpu);
    fn->addFnAttr("target-features", impl_->features);
    ir.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", fn));
    ir.CreateCall(body, {shape, fn->getArg(0), fn->getArg(1)});
    ir.CreateRetVoid();
  }
  impl_->optimize(*module, *target);
  ++impl_->compiled;
  module->setModuleIdentifier(key);                                      // the object cache's key
  if (const char* dump = std::getenv("KNIT_JIT_DUMP"); dump && *dump) {  // optimized IR, for reading
    std::error_code ec;
    std::filesystem::create_directories(dump, ec);
    llvm::raw_fd_ostream out(std::string(dump) + "/" + key.substr(0, 24) + ".ll", ec);
    if (!ec) module->print(out, nullptr);
  }
  impl_->jit->add_module(std::move(module), std::move(context));
  finish();
}

std::string Specializer::host_description() const {
  return impl_->triple + ";" + impl_->cpu + ";" + impl_->features + ";LLVM " + LLVM_VERSION_STRING;
}

int64_t Specializer::modules_compiled() const { return impl_->compiled; }
int64_t Specializer::modules_from_cache() const { return impl_->from_cache; }
int64_t Specializer::cache_entries_rejected() const {
  return impl_->cache ? impl_->cache->entries().rejected.load() : 0;
}
std::string Specializer::cache_directory() const { return impl_->cache ? impl_->cache_dir : ""; }

}  // namespace knit::codegen
