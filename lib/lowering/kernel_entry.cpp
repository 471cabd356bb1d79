// A kernel's body and ABI entry, and the frame that makes its code independent of the graph
// around it: the same kernel in two graphs (a second transformer block) is the same code.
#include "lowering/kernel_entry.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"

namespace lazyjit::lowering {

llvm::Function* create_kernel_body(llvm::Module& module, const std::string& symbol, int num_buffers) {
  llvm::IRBuilder<> b(module.getContext());
  std::vector<llvm::Type*> params(num_buffers + 1, b.getPtrTy());
  params.push_back(b.getInt64Ty());
  params.push_back(b.getInt64Ty());
  auto* body = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), params, false),
                                      llvm::Function::InternalLinkage, symbol + ".body", module);
  body->addFnAttr(llvm::Attribute::NoUnwind);
  for (int i = 0; i <= num_buffers; ++i) body->addParamAttr(i, llvm::Attribute::NoAlias);
  return body;
}

namespace {

/// `body` with only the buffer arguments it uses, in order of first use; `used` gets their
/// indices in the graph's buffer array.
llvm::Function* localize_buffers(llvm::Function* body, int num_buffers, std::vector<int>& used) {
  std::vector<bool> seen(num_buffers, false);
  for (llvm::BasicBlock& block : *body) {
    for (llvm::Instruction& inst : block) {
      for (llvm::Value* operand : inst.operands()) {
        auto* arg = llvm::dyn_cast<llvm::Argument>(operand);
        if (arg == nullptr || arg->getArgNo() >= static_cast<unsigned>(num_buffers) || seen[arg->getArgNo()]) continue;
        seen[arg->getArgNo()] = true;
        used.push_back(static_cast<int>(arg->getArgNo()));
      }
    }
  }
  llvm::IRBuilder<> b(body->getContext());
  std::vector<llvm::Type*> params(used.size() + 1, b.getPtrTy());
  params.push_back(b.getInt64Ty());
  params.push_back(b.getInt64Ty());
  auto* local = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), params, false),
                                       llvm::Function::InternalLinkage, "", body->getParent());
  local->takeName(body);
  local->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t k = 0; k <= used.size(); ++k) local->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
  local->splice(local->end(), body);
  for (size_t k = 0; k < used.size(); ++k) body->getArg(used[k])->replaceAllUsesWith(local->getArg(k));
  for (int extra = 0; extra < 3; ++extra) {
    body->getArg(num_buffers + extra)->replaceAllUsesWith(local->getArg(static_cast<unsigned>(used.size()) + extra));
  }
  body->eraseFromParent();
  return local;
}

/// Renumbers the slots of `table` (8-byte slots, addressed by constant graph-wide indices)
/// that `fn` reads to local ones, in order of first use; returns the graph-wide index of each.
/// Loads named `name`N are renamed after their local slot.
std::vector<int> localize_slots(llvm::Function& fn, llvm::Argument& table, std::string_view name) {
  std::vector<int> slots;
  absl::flat_hash_map<int64_t, int> local;
  for (llvm::BasicBlock& block : fn) {
    for (llvm::Instruction& inst : block) {
      auto* gep = llvm::dyn_cast<llvm::GetElementPtrInst>(&inst);
      if (gep == nullptr || gep->getPointerOperand() != &table) continue;
      auto* index = llvm::dyn_cast<llvm::ConstantInt>(gep->getOperand(1));
      assert(gep->getNumIndices() == 1 && index != nullptr && "tables are read at constant slots");
      const auto [it, fresh] = local.try_emplace(index->getSExtValue(), static_cast<int>(slots.size()));
      if (fresh) slots.push_back(static_cast<int>(index->getSExtValue()));
      gep->setOperand(1, llvm::ConstantInt::get(index->getType(), it->second));
      for (llvm::User* user : gep->users()) {
        if (user->getName().starts_with(name)) user->setName(std::string(name) + std::to_string(it->second));
      }
    }
  }
  assert(std::all_of(table.users().begin(), table.users().end(),
                     [](const llvm::User* u) { return llvm::isa<llvm::GetElementPtrInst>(u); }) &&
         "every read of a table goes through a slot");
  return slots;
}

}  // namespace

KernelFrame finish_kernel(llvm::Module& module, const std::string& symbol, llvm::Function*& body, int num_buffers,
                          int scalar_table) {
  KernelFrame frame;
  body = localize_buffers(body, num_buffers, frame.buffers);
  const unsigned num_args = static_cast<unsigned>(frame.buffers.size());
  frame.dims = localize_slots(*body, *body->getArg(num_args), "dim");
  for (unsigned k = 0; k < num_args; ++k) {
    if (frame.buffers[k] != scalar_table) continue;
    frame.scalars = localize_slots(*body, *body->getArg(k), "scalar");
    frame.buffers[k] = KernelFrame::kScalars;
  }

  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = b.getPtrTy();
  auto* i64 = b.getInt64Ty();
  auto* entry = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64, i64}, false),
                                       llvm::Function::ExternalLinkage, symbol, module);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  const char* names[] = {"args", "dims", "begin", "end"};
  for (int i = 0; i < 4; ++i) entry->getArg(i)->setName(names[i]);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  std::vector<llvm::Value*> args;
  for (unsigned k = 0; k < num_args; ++k) {
    args.push_back(b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), k)));
  }
  for (int i = 1; i < 4; ++i) args.push_back(entry->getArg(i));
  b.CreateCall(body, args);
  b.CreateRetVoid();
  return frame;
}

}  // namespace lazyjit::lowering
