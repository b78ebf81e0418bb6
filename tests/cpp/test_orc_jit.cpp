// The ORC wrapper JIT-compiles a module built with LLVM's IRBuilder and runs it natively.
#include <cmath>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <catch2/catch.hpp>

#include "knit/ir/error.h"
#include "knit/jit/orc_jit.h"

namespace {

// float NAME(float a, float b, float c) { return a * b + c; }  (separate fmul + fadd)
std::pair<std::unique_ptr<llvm::Module>, std::unique_ptr<llvm::LLVMContext>> mul_add_module(const std::string& name) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = std::make_unique<llvm::Module>("knit_test", *ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(*ctx);
  auto* fty = llvm::FunctionType::get(f32, {f32, f32, f32}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, mod.get());
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(*ctx, "entry", fn));
  auto args = fn->arg_begin();
  llvm::Value* a = &*args++;
  llvm::Value* x = &*args++;
  llvm::Value* c = &*args;
  b.CreateRet(b.CreateFAdd(b.CreateFMul(a, x), c));
  return {std::move(mod), std::move(ctx)};
}

}  // namespace

TEST_CASE("OrcJit compiles, runs and removes a module", "[codegen][jit]") {
  knit::codegen::OrcJit jit;
  CHECK(!jit.target_triple().empty());
  auto [mod, ctx] = mul_add_module("knit_mul_add");
  const uint64_t handle = jit.add_module(std::move(mod), std::move(ctx));
  auto* fn = reinterpret_cast<float (*)(float, float, float)>(jit.lookup("knit_mul_add"));
  REQUIRE(fn != nullptr);
  CHECK(fn(3.0f, 4.0f, 0.5f) == 12.5f);
  // fp32 rounding of the product before the add (no fused multiply-add was requested).
  const float a = 1.0f + std::ldexp(1.0f, -12), c = -1.0f - std::ldexp(1.0f, -11);
  CHECK(fn(a, a, c) == (a * a) + c);
  jit.remove(handle);
  CHECK_THROWS_AS(jit.lookup("knit_mul_add"), knit::Error);
  CHECK_THROWS_AS(jit.remove(handle), knit::Error);
}
