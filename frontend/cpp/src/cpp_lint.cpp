#include "knit/frontend/cpp_lint.h"

#include <filesystem>
#include <optional>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Lexer.h>

#include "clang_session.h"
#include "knit/ir/types.h"
#include "pch.h"

namespace knit::frontend {

namespace {

constexpr int64_t kPartitions = 128;      // SBUF / PSUM partitions (nl::tile_size::pmax)
constexpr int64_t kPsumBankBytes = 2048;  // one PSUM bank per partition: 512 fp32

// Bytes of the nl:: dtype constant a kernel names (nl::float32 is ir::DType::float32, spelled
// the same), from the IR's dtype table; other expressions are not judged.
std::optional<int64_t> dtype_bytes(const std::string& name) {
  if (const std::optional<ir::DType> d = ir::parse_enum<ir::DType>(name)) return ir::dtype_size(*d);
  return std::nullopt;
}

// The name an argument refers to (nl::psum -> "psum"), or "".
std::string referenced_name(const clang::Expr* e) {
  if (const auto* ref = llvm::dyn_cast<clang::DeclRefExpr>(e->IgnoreParenImpCasts()))
    return ref->getDecl()->getNameAsString();
  return "";
}

// The braced list inside an argument such as `{p, cols}` (under the std::vector constructor).
const clang::InitListExpr* braced_list(const clang::Stmt* s) {
  if (!s) return nullptr;
  if (const auto* list = llvm::dyn_cast<clang::InitListExpr>(s)) return list;
  for (const clang::Stmt* child : s->children())
    if (const clang::InitListExpr* list = braced_list(child)) return list;
  return nullptr;
}

bool calls_reg_constant(const clang::Stmt* s) {
  if (!s) return false;
  if (const auto* call = llvm::dyn_cast<clang::CXXMemberCallExpr>(s))
    if (const clang::CXXMethodDecl* m = call->getMethodDecl();
        m && m->getQualifiedNameAsString() == "knit::nl::reg::constant")
      return true;
  for (const clang::Stmt* child : s->children())
    if (calls_reg_constant(child)) return true;
  return false;
}

class LintVisitor : public clang::RecursiveASTVisitor<LintVisitor> {
 public:
  LintVisitor(clang::ASTContext& ctx, std::vector<LintFinding>& out)
      : ctx_(ctx), sm_(ctx.getSourceManager()), out_(out) {}

  bool VisitCallExpr(clang::CallExpr* call) {
    const clang::FunctionDecl* fn = call->getDirectCallee();
    if (!fn || !in_file(call) || fn->getQualifiedNameAsString() != "knit::nl::ndarray" || call->getNumArgs() < 2)
      return true;
    const clang::InitListExpr* shape = braced_list(call->getArg(0));
    // nl::ndarray's buffer defaults to SBUF.
    const std::string buffer = call->getNumArgs() > 2 && !llvm::isa<clang::CXXDefaultArgExpr>(call->getArg(2))
                                   ? referenced_name(call->getArg(2))
                                   : "sbuf";
    if (!shape || shape->getNumInits() == 0 || (buffer != "sbuf" && buffer != "psum")) return true;
    check_partition_dim(shape->getInit(0)->IgnoreParenImpCasts(), buffer);
    if (buffer == "psum") check_psum_size(shape, referenced_name(call->getArg(1)));
    return true;
  }

  bool VisitIfStmt(clang::IfStmt* s) { return check_branch(s->getCond(), "if"); }
  bool VisitWhileStmt(clang::WhileStmt* s) { return check_branch(s->getCond(), "while"); }
  bool VisitForStmt(clang::ForStmt* s) { return check_branch(s->getCond(), "for"); }
  bool VisitDoStmt(clang::DoStmt* s) { return check_branch(s->getCond(), "do-while"); }
  bool VisitConditionalOperator(clang::ConditionalOperator* s) { return check_branch(s->getCond(), "?:"); }

 private:
  bool in_file(const clang::Stmt* s) const { return sm_.isInMainFile(sm_.getExpansionLoc(s->getBeginLoc())); }

  std::string text_of(const clang::Stmt* s) const {
    return clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(s->getSourceRange()), sm_,
                                       ctx_.getLangOpts())
        .str();
  }

  std::optional<int64_t> constant(const clang::Expr* e) const {
    clang::Expr::EvalResult result;
    if (!e->isValueDependent() && e->EvaluateAsInt(result, ctx_)) return result.Val.getInt().getExtValue();
    return std::nullopt;
  }

  // Whether a partition size is at most 128 on every path the code can take: a constant, a
  // std::min with a constant <= 128, a ?: of bounded values, a const variable initialized so, or
  // a function parameter (not judged).
  bool bounded(const clang::Expr* e, int depth = 0) const {
    e = e->IgnoreParenImpCasts();
    if (depth > 8) return false;
    if (auto v = constant(e)) return *v <= kPartitions;
    if (const auto* call = llvm::dyn_cast<clang::CallExpr>(e)) {
      const clang::FunctionDecl* fn = call->getDirectCallee();
      if (fn && fn->getNameAsString() == "min")
        for (const clang::Expr* arg : call->arguments())
          if (bounded(arg, depth + 1)) return true;
      return false;
    }
    if (const auto* cond = llvm::dyn_cast<clang::ConditionalOperator>(e))
      return bounded(cond->getTrueExpr(), depth + 1) && bounded(cond->getFalseExpr(), depth + 1);
    if (const auto* ref = llvm::dyn_cast<clang::DeclRefExpr>(e)) {
      // A parameter's bound is its callers' business (the check does not follow calls).
      if (llvm::isa<clang::ParmVarDecl>(ref->getDecl())) return true;
      if (const auto* var = llvm::dyn_cast<clang::VarDecl>(ref->getDecl());
          var && var->getType().isConstQualified() && var->getInit())
        return bounded(var->getInit(), depth + 1);
    }
    return false;
  }

  void check_partition_dim(const clang::Expr* dim, const std::string& buffer) {
    if (auto v = constant(dim); v && *v > kPartitions) {
      report(dim, "error", "partition-dim",
             "partition dimension " + std::to_string(*v) + " of this " + buffer +
                 " tile exceeds the 128 partitions; "
                 "tile the first dimension by nl::tile_size::pmax");
    } else if (!bounded(dim)) {
      report(dim, "warning", "partition-dim",
             "partition dimension `" + text_of(dim) + "` of this " + buffer +
                 " tile can exceed 128 (nothing bounds it "
                 "here); use std::min(nl::tile_size::pmax, ...) in a const variable, or a constant");
    }
  }

  void check_psum_size(const clang::InitListExpr* shape, const std::string& dtype) {
    const std::optional<int64_t> bytes = dtype_bytes(dtype);
    if (!bytes || shape->getNumInits() < 2) return;
    int64_t free = 1;
    for (unsigned i = 1; i < shape->getNumInits(); ++i) {
      const std::optional<int64_t> d = constant(shape->getInit(i)->IgnoreParenImpCasts());
      if (!d) return;  // a size known only while tracing: the verifier judges it then
      free *= *d;
    }
    if (free * *bytes > kPsumBankBytes)
      report(shape, "warning", "psum-bank",
             "this PSUM tile holds " + std::to_string(free * *bytes) + " bytes per partition (" + std::to_string(free) +
                 " " + dtype +
                 "), more than one 2 KiB PSUM bank: a matmul writing it crosses banks, which trn1/trn2 "
                 "reject; keep each PSUM tile within 512 fp32 per partition and tile the free dimension");
  }

  bool check_branch(const clang::Expr* cond, const std::string& what) {
    if (cond && in_file(cond) && calls_reg_constant(cond))
      report(cond, "warning", "device-branch",
             "this `" + what +
                 "` branches on reg::constant(), the part of a device register known while tracing; "
                 "the register's value exists only on the device. Branch on the device with nl::if_else, "
                 "nl::while_loop or nl::dynamic_range");
    return true;
  }

  void report(const clang::Stmt* s, std::string severity, std::string rule, std::string message) {
    const clang::SourceLocation b = sm_.getExpansionLoc(s->getBeginLoc());
    const clang::SourceLocation e = clang::Lexer::getLocForEndOfToken(sm_.getExpansionLoc(s->getEndLoc()), 0, sm_,
                                                                      ctx_.getLangOpts());
    LintFinding f;
    f.severity = std::move(severity);
    f.rule = std::move(rule);
    f.message = std::move(message);
    f.begin = {sm_.getFilename(b).str(), static_cast<int>(sm_.getExpansionLineNumber(b)),
               static_cast<int>(sm_.getExpansionColumnNumber(b))};
    f.end_line = static_cast<int>(sm_.getExpansionLineNumber(e));
    f.end_column = static_cast<int>(sm_.getExpansionColumnNumber(e)) - 1;  // the last character, not one past it
    out_.push_back(std::move(f));
  }

  clang::ASTContext& ctx_;
  clang::SourceManager& sm_;
  std::vector<LintFinding>& out_;
};

class LintConsumer : public clang::ASTConsumer {
 public:
  explicit LintConsumer(std::vector<LintFinding>& out) : out_(out) {}
  void HandleTranslationUnit(clang::ASTContext& ctx) override {
    if (ctx.getDiagnostics().hasErrorOccurred()) return;
    LintVisitor(ctx, out_).TraverseDecl(ctx.getTranslationUnitDecl());
  }

 private:
  std::vector<LintFinding>& out_;
};

class LintAction : public clang::ASTFrontendAction {
 public:
  explicit LintAction(std::vector<LintFinding>& out) : out_(out) {}
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance&, llvm::StringRef) override {
    return std::make_unique<LintConsumer>(out_);
  }

 private:
  std::vector<LintFinding>& out_;
};

}  // namespace

std::vector<LintFinding> lint_file(const std::string& path, const std::vector<std::string>& extra_args) {
  std::error_code ec;  // (a name too long for the file system is no file either)
  if (!std::filesystem::is_regular_file(path, ec))
    user_error(SourceLoc{path, 0, 0}, "cpp-file", "no C++ kernel file " + path + "; give the path of a .cpp file");
  const std::string file = std::filesystem::absolute(path).lexically_normal().string();
  const std::string pch = extra_args.empty() ? knit_pch(base_flags()) : "";
  for (const bool with_pch : {true, false}) {
    if (with_pch && pch.empty()) continue;
    CollectingConsumer diags;
    auto ci = instance(command_line(file, extra_args, with_pch ? pch : ""), diags);
    std::vector<LintFinding> findings;
    LintAction action(findings);
    if (ci->ExecuteAction(action) && !ci->getDiagnostics().hasErrorOccurred()) return findings;
    if (!(with_pch && diags.refused_pch())) diags.fail(file);
    discard_pch(pch);  // refused: try again without it
  }
  return {};
}

}  // namespace knit::frontend
