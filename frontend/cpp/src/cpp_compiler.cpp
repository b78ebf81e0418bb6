#include "knit/frontend/cpp_compiler.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Frontend/MultiplexConsumer.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>

#include "clang_session.h"
#include "kernel_key.h"
#include "knit/ir/error.h"
#include "knit/jit/object_cache.h"
#include "knit/jit/orc_jit.h"
#include "knit/knit.h"
#include "pch.h"

namespace knit::frontend {

namespace {

constexpr const char* kEntryPrefix = "knit_kernel_entry_";

// The parameter names of each marked kernel ({"knit_kernel_entry_rmsnorm", {"x", "w"}}): C++ has
// no reflection of them, but the AST has. KNIT_KERNEL(fn)'s entry calls detail::entry_of<&fn>,
// whose template argument is the kernel function.
class KernelParamNames : public clang::ASTConsumer, public clang::RecursiveASTVisitor<KernelParamNames> {
 public:
  explicit KernelParamNames(std::map<std::string, std::vector<std::string>>& out) : out_(out) {}
  // Each declaration as it is parsed, in the file or its own headers: not the whole translation
  // unit, whose walk would deserialize the precompiled header's declarations too.
  bool HandleTopLevelDecl(clang::DeclGroupRef group) override {
    for (clang::Decl* d : group) TraverseDecl(d);
    return true;
  }

  bool VisitFunctionDecl(clang::FunctionDecl* f) {
    // (getName() is only for plain identifiers: constructors and operators have none.)
    if (f->getIdentifier() && f->getName().starts_with(kEntryPrefix) && f->hasBody()) {
      current_ = f->getNameAsString();
      TraverseStmt(f->getBody());
      current_.clear();
    }
    return true;
  }
  bool VisitCallExpr(clang::CallExpr* call) {
    const clang::FunctionDecl* callee = call->getDirectCallee();
    if (current_.empty() || !callee || !callee->getIdentifier() || callee->getName() != "entry_of") return true;
    const clang::TemplateArgumentList* targs = callee->getTemplateSpecializationArgs();
    if (!targs || targs->size() == 0 || targs->get(0).getKind() != clang::TemplateArgument::Declaration) return true;
    if (const auto* fn = llvm::dyn_cast<clang::FunctionDecl>(targs->get(0).getAsDecl())) {
      std::vector<std::string>& names = out_[current_];
      for (const clang::ParmVarDecl* p : fn->parameters()) names.push_back(p->getNameAsString());
    }
    return true;
  }

 private:
  std::map<std::string, std::vector<std::string>>& out_;
  std::string current_;
};

// Clang's LLVM IR generation with KernelParamNames looking at the same AST.
class EmitWithParamNames : public clang::EmitLLVMOnlyAction {
 public:
  EmitWithParamNames(llvm::LLVMContext* context, std::map<std::string, std::vector<std::string>>& names)
      : EmitLLVMOnlyAction(context), names_(names) {}
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef file) override {
    std::vector<std::unique_ptr<clang::ASTConsumer>> consumers;
    consumers.push_back(std::make_unique<KernelParamNames>(names_));
    consumers.push_back(EmitLLVMOnlyAction::CreateASTConsumer(ci, file));
    return std::make_unique<clang::MultiplexConsumer>(std::move(consumers));
  }

 private:
  std::map<std::string, std::vector<std::string>>& names_;
};

// One line per kernel in the cache's kernel list: its entry point, then its parameter names.
std::string entry_line(const std::string& entry, const std::vector<std::string>& params) {
  std::string line = entry;
  for (const std::string& p : params) line += " " + p;
  return line;
}

// The cache entry of a compiled file's kernel list, beside its object.
std::string entries_key(const std::string& key) { return codegen::content_hash(key + "\nentries"); }

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace

std::vector<std::string> knit_include_dirs() {
  // An installed package (pip) carries the headers next to the extension, in include/; a source
  // build uses the source tree's folders, compiled in.
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&knit_include_dirs), &self) && self.dli_fname) {
    const auto installed = std::filesystem::path(self.dli_fname).parent_path() / "include";
    if (std::filesystem::exists(installed / "knit" / "knit.h")) return {installed.string()};
  }
  std::vector<std::string> dirs;
  std::istringstream in(KNIT_INCLUDE_DIRS);
  for (std::string dir; std::getline(in, dir, '|');)
    if (!dir.empty()) dirs.push_back(dir);
  return dirs;
}

struct CppKernelFile::Impl {
  std::unique_ptr<codegen::DiskObjectCache> cache;
  std::unique_ptr<codegen::OrcJit> jit;
};

CppKernelFile::~CppKernelFile() = default;

bool CppKernelFile::compile_or_load(const std::vector<std::string>& args, codegen::DiskObjectCache* cache,
                                    codegen::OrcJit& jit, CollectingConsumer& diags, CppKernelFile& out,
                                    std::vector<std::string>& entry_names) {
  // Without a cache (KNIT_CACHE=0) there is nothing to key: skip the preprocessing pass. A
  // command line never compiled before is keyed by what its compile reads (kernel_key.h).
  std::optional<std::string> key = cache ? kernel_file_key(args, jit, *cache, diags) : args.back();
  if (key && key->empty()) return false;
  std::unique_ptr<llvm::MemoryBuffer> object, entry_list;
  if (cache && key && (entry_list = cache->load(entries_key(*key))) && (object = cache->load(*key))) {
    std::istringstream in(entry_list->getBuffer().str());
    for (std::string line; std::getline(in, line);) entry_names.push_back(line);
    jit.add_object(std::move(object));
    out.from_cache_ = true;
    out.cache_key_ = *key;
    return true;
  }
  auto context = std::make_unique<llvm::LLVMContext>();
  const size_t before_compile = diags.items.size();  // the key's preprocessing reported some already
  auto ci = instance(args, diags);
  auto read = std::make_shared<Dependencies>();
  if (!key) ci->addDependencyCollector(read);
  std::map<std::string, std::vector<std::string>> params;
  EmitWithParamNames action(context.get(), params);
  if (!ci->ExecuteAction(action)) return false;
  std::unique_ptr<llvm::Module> module = action.takeModule();
  if (!module) return false;
  for (const llvm::Function& f : module->functions())
    if (!f.isDeclaration() && f.getName().starts_with(kEntryPrefix))
      entry_names.push_back(entry_line(f.getName().str(), params[f.getName().str()]));
  for (size_t i = before_compile; i < diags.items.size(); ++i)
    if (diags.items[i].severity == "warning")
      out.warnings_.push_back(format_diagnostic("warning", "", diags.items[i].message, diags.items[i].loc));
  if (!key) key = key_of_compile(args, jit, *cache, read->getDependencies());
  module->setModuleIdentifier(*key);  // the object cache stores the compiled object under it
  jit.add_module(std::move(module), std::move(context));
  if (cache) {
    cache->store(entries_key(*key), join_lines(entry_names));
    out.cache_key_ = *key;
  }
  return true;
}

std::unique_ptr<CppKernelFile> CppKernelFile::load(const std::string& path,
                                                   const std::vector<std::string>& extra_args) {
  std::error_code ec;  // (a name too long for the file system is no file either)
  if (!std::filesystem::is_regular_file(path, ec))
    user_error(SourceLoc{path, 0, 0}, "cpp-file", "no C++ kernel file " + path + "; give the path of a .cpp file");
  const std::string file = std::filesystem::absolute(path).lexically_normal().string();
  std::unique_ptr<CppKernelFile> out(new CppKernelFile());
  out->impl_ = std::make_unique<Impl>();
  Impl& impl = *out->impl_;
  if (const std::string dir = codegen::cache_directory(); !dir.empty())
    impl.cache = std::make_unique<codegen::DiskObjectCache>(dir + "/objects");
  // (A kernel file's code runs once, to trace: generate it fast rather than well.)
  impl.jit = std::make_unique<codegen::OrcJit>(impl.cache.get(), codegen::OrcJit::CodeGen::fast);
  // The precompiled header only without extra flags: a -D could change what the header means.
  std::string pch = extra_args.empty() ? knit_pch(base_flags()) : "";
  std::vector<std::string> entry_names;
  for (;;) {
    CollectingConsumer diags;
    if (compile_or_load(command_line(file, extra_args, pch), impl.cache.get(), *impl.jit, diags, *out, entry_names))
      break;
    if (pch.empty() || !diags.refused_pch()) diags.fail(file);
    discard_pch(pch);  // Clang refused it (corrupt, or another build's): drop it, compile without
    pch.clear();
  }
  if (entry_names.empty())
    user_error(SourceLoc{file, 0, 0}, "cpp-no-kernels",
               "no kernel is marked in " + file + "; add KNIT_KERNEL(your_kernel) after each kernel function");
  for (const std::string& line : entry_names) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    std::vector<std::string> params;
    for (std::string p; words >> p;) params.push_back(p);
    void* fn = impl.jit->lookup(name);
    KernelEntry entry;
    reinterpret_cast<void (*)(KernelEntry*)>(fn)(&entry);
    if (params.size() != entry.arity) params.clear();  // unnamed parameters: arg0, arg1, ...
    for (size_t i = params.size(); i < entry.arity; ++i) params.push_back("arg" + std::to_string(i));
    out->kernels_.push_back({entry.name, entry.arity, static_cast<int>(entry.where.line()), params});
    out->entries_.push_back(fn);
  }
  return out;
}

ir::Kernel CppKernelFile::trace(const std::string& name, const std::vector<CppTensorSpec>& args,
                                ir::Target target) const {
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const std::string& full = kernels_[k].name;
    const size_t colon = full.rfind("::");
    const std::string last = colon == std::string::npos ? full : full.substr(colon + 2);
    if (name != full && name != last) continue;
    KernelEntry entry;
    reinterpret_cast<void (*)(KernelEntry*)>(entries_[k])(&entry);
    std::vector<ArgSpec> specs;
    for (size_t i = 0; i < args.size(); ++i)
      specs.push_back({args[i].shape, args[i].dtype,
                       args[i].name.empty() && i < kernels_[k].params.size() ? kernels_[k].params[i] : args[i].name});
    try {
      return entry.trace(last, specs, target, entry.where);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // thrown by the kernel's own C++ (or a library it calls)
      // The KNIT_KERNEL line, without its column (which points inside the macro's expansion).
      user_error(SourceLoc{entry.where.file_name(), static_cast<int>(entry.where.line()), 0}, "cpp-exception",
                 "kernel " + last + " threw a C++ exception while being traced: " + e.what() +
                     " (fix the kernel code; Knit's own checks report the kernel line)");
    }
  }
  std::string known;
  for (const CppKernelInfo& k : kernels_) known += (known.empty() ? "" : ", ") + k.name;
  user_error(SourceLoc{}, "cpp-kernel", "no kernel '" + name + "' in the file; it marks " + known);
}

}  // namespace knit::frontend
