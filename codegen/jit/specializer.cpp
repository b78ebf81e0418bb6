#include "knit/jit/specializer.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

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
#include "knit/jit/disk_cache.h"
#include "knit/jit/orc_jit.h"

namespace knit::codegen {

struct Specializer::Impl {
  std::string_view library;
  std::string library_hash;
  std::unique_ptr<DiskObjectCache> cache;  // null when caching is off
  std::string cache_dir;
  std::unique_ptr<OrcJit> jit;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::string cpu, features;
  std::map<std::pair<std::string, std::string>, SpecializedFn> done;
  int64_t compiled = 0, from_cache = 0;  // modules built by LLVM / loaded from the disk cache
  std::mutex mutex;

  std::unique_ptr<llvm::Module> load(llvm::LLVMContext& context) {
    auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(library.data(), library.size()), "knit-library",
                                                   /*RequiresNullTerminator=*/false);
    auto module = llvm::parseBitcodeFile(buffer->getMemBufferRef(), context);
    if (!module) internal_error("reading the native body library: " + llvm::toString(module.takeError()));
    return std::move(*module);
  }

  // O3 for the host, after dropping every library function no wrapper reaches.
  void optimize(llvm::Module& module) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder builder(machine.get());
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
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) internal_error("detecting the host CPU: " + llvm::toString(builder.takeError()));
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl_->cpu = builder->getCPU();
  impl_->features = builder->getFeatures().getString();
  auto machine = builder->createTargetMachine();
  if (!machine) internal_error("creating the host target machine: " + llvm::toString(machine.takeError()));
  impl_->machine = std::move(*machine);
}

Specializer::~Specializer() = default;

std::vector<SpecializedFn> Specializer::compile(const std::vector<SpecializeRequest>& requests) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<SpecializedFn> out(requests.size(), nullptr);
  std::vector<size_t> missing;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto it = impl_->done.find({requests[i].body, requests[i].constant});
    if (it != impl_->done.end()) out[i] = it->second;
    else missing.push_back(i);
  }
  if (missing.empty()) return out;

  // Everything the generated code depends on: Knit, the body library, LLVM, the host CPU and
  // the requests themselves.
  std::string key_text = std::string("knit " KNIT_VERSION "\n") + impl_->library_hash + "\n" + host_description() + "\n";
  for (size_t i : missing) {
    key_text += requests[i].body + "\n" + std::to_string(requests[i].constant.size()) + "\n";
    key_text += requests[i].constant;
  }
  const std::string key = content_hash(key_text);
  // The k-th wrapper's symbol: the same in a compiled module and in its cached object.
  auto wrapper_name = [&](size_t k) { return "knit_spec_" + key.substr(0, 24) + "_" + std::to_string(k); };
  auto finish = [&] {
    for (size_t k = 0; k < missing.size(); ++k) {
      const size_t i = missing[k];
      out[i] = reinterpret_cast<SpecializedFn>(impl_->jit->lookup(wrapper_name(k)));
      impl_->done[{requests[i].body, requests[i].constant}] = out[i];
    }
    return out;
  };
  if (impl_->cache)
    if (auto object = impl_->cache->load(key)) {
      ++impl_->from_cache;
      impl_->jit->add_object(std::move(object));
      return finish();
    }

  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = impl_->load(*context);
  module->setTargetTriple(impl_->machine->getTargetTriple().str());
  module->setDataLayout(impl_->machine->createDataLayout());
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
  impl_->optimize(*module);
  ++impl_->compiled;
  module->setModuleIdentifier(key);  // the object cache's key
  if (const char* dump = std::getenv("KNIT_JIT_DUMP"); dump && *dump) {  // optimized IR, for reading
    std::error_code ec;
    std::filesystem::create_directories(dump, ec);
    llvm::raw_fd_ostream out(std::string(dump) + "/" + key.substr(0, 24) + ".ll", ec);
    if (!ec) module->print(out, nullptr);
  }
  impl_->jit->add_module(std::move(module), std::move(context));
  return finish();
}

std::string Specializer::host_description() const {
  return impl_->machine->getTargetTriple().str() + ";" + impl_->cpu + ";" + impl_->features + ";LLVM " +
         LLVM_VERSION_STRING;
}

int64_t Specializer::modules_compiled() const { return impl_->compiled; }
int64_t Specializer::modules_from_cache() const { return impl_->from_cache; }
int64_t Specializer::cache_entries_rejected() const { return impl_->cache ? impl_->cache->rejected : 0; }
std::string Specializer::cache_directory() const { return impl_->cache ? impl_->cache_dir : ""; }

}  // namespace knit::codegen
