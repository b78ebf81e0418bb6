#include "knit/jit/orc_jit.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include "knit/ir/error.h"

namespace knit::codegen {

namespace {

// LLVM errors become Knit internal errors at this boundary.
template <class T>
T unwrap(llvm::Expected<T> value, const char* what) {
  if (!value) internal_error(std::string(what) + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}
void check(llvm::Error err, const char* what) {
  if (err) internal_error(std::string(what) + ": " + llvm::toString(std::move(err)));
}

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

}  // namespace

struct OrcJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mutex;  // guards trackers and next_handle (modules are added from several threads)
  std::map<uint64_t, llvm::orc::ResourceTrackerSP> trackers;
  uint64_t next_handle = 1;
  std::string triple, cpu;
};

OrcJit::OrcJit(llvm::ObjectCache* cache, CodeGen codegen) : impl_(std::make_unique<Impl>()) {
  initialize_native_target();
  auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  if (codegen == CodeGen::fast) jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  impl_->triple = jtmb.getTargetTriple().str();
  impl_->cpu = jtmb.getCPU();
  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(std::move(jtmb));
  // A compiler that makes a target machine per module, so modules can be compiled on several
  // threads at once (the Specializer does), with the object cache when there is one.
  builder.setCompileFunctionCreator([cache](llvm::orc::JITTargetMachineBuilder machine)
                                        -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
    return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(machine), cache);
  });
  impl_->jit = unwrap(builder.create(), "creating the LLVM ORC JIT");
  // Generated code may call the C and C++ runtimes (libm's expf, static-local guards, operator
  // new). In a Python extension those libraries are not in the global symbol scope, so they are
  // named explicitly besides the process itself.
  const char prefix = impl_->jit->getDataLayout().getGlobalPrefix();
  auto& dylib = impl_->jit->getMainJITDylib();
  dylib.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix),
                            "exposing the process's symbols to the JIT"));
  for (const char* runtime : {"libstdc++.so.6", "libgcc_s.so.1", "libm.so.6"})
    if (auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(runtime, prefix))
      dylib.addGenerator(std::move(*generator));
    else llvm::consumeError(generator.takeError());  // absent runtimes are only needed if referenced
  // Kernels compiled from C++ files (frontend/cpp) call Knit itself (the IR builder). When Knit
  // lives in a shared library (a Python extension) its symbols are not the process's, so look
  // them up in that library through a local handle: reopening it RTLD_GLOBAL (what
  // DynamicLibrarySearchGenerator::Load does) would put its LLVM symbols in front of every
  // library loaded later, and a second LLVM (Triton's) then crashes on load.
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&initialize_native_target), &self) && self.dli_fname)
    if (void* handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD))
      dylib.addGenerator(
          std::make_unique<llvm::orc::DynamicLibrarySearchGenerator>(llvm::sys::DynamicLibrary(handle), prefix));
}

OrcJit::~OrcJit() = default;

uint64_t OrcJit::add_module(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context) {
  module->setDataLayout(impl_->jit->getDataLayout());
  auto tracker = impl_->jit->getMainJITDylib().createResourceTracker();
  check(impl_->jit->addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(module), std::move(context))),
        "adding a module to the JIT");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const uint64_t handle = impl_->next_handle++;
  impl_->trackers[handle] = tracker;
  return handle;
}

void OrcJit::add_object(std::unique_ptr<llvm::MemoryBuffer> object) {
  check(impl_->jit->addObjectFile(std::move(object)), "adding an object file to the JIT");
}

void* OrcJit::lookup(const std::string& name) {
  auto addr = unwrap(impl_->jit->lookup(name), "looking up a JIT symbol");
  return addr.toPtr<void*>();
}

void OrcJit::remove(uint64_t handle) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->trackers.find(handle);
  if (it == impl_->trackers.end()) internal_error("OrcJit::remove of an unknown module handle");
  check(it->second->remove(), "removing a JIT module");
  impl_->trackers.erase(it);
}

std::string OrcJit::target_triple() const { return impl_->triple; }
std::string OrcJit::cpu() const { return impl_->cpu; }

}  // namespace knit::codegen
