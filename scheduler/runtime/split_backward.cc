#include "scheduler/runtime/split_backward.h"

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/ops/ones_like.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

namespace zeropp {
namespace scheduler {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

// The gradient that reaches a boundary node in B (the first time it runs; W runs it again).
struct Slot {
  bool armed = true;
  variable_list grads;
};

class CaptureHook : public torch::autograd::FunctionPreHook {
 public:
  explicit CaptureHook(std::shared_ptr<Slot> slot) : slot_(std::move(slot)) {}
  variable_list operator()(const variable_list& grads) override {
    if (slot_->armed) {
      slot_->grads = grads;
      slot_->armed = false;
    }
    return grads;
  }

 private:
  std::shared_ptr<Slot> slot_;
};

// Node kinds whose weight outputs need the incoming gradient and saved activations only. Not layer
// norm: its CPU backward takes gamma's data pointer even for dgamma alone, which fails once the
// chunk's weights are freed (tried: "data is not allocated yet" in the pipeline parity test).
bool Deferrable(const Node& n) {
  std::string name = n.name();
  const size_t colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  return name == "AddmmBackward0" || name == "MmBackward0" || name == "BmmBackward0" || name == "AddBackward0" ||
         name == "SubBackward0" || name == "MulBackward0";
}

struct Info {
  std::shared_ptr<Node> node;
  bool reach_x = false;    // on a path to the chunk's input
  bool has_param = false;  // reaches a parameter's accumulator
};

// Post-order walk of the graph under `root`: children before parents.
std::vector<Node*> Sort(const std::shared_ptr<Node>& root, const Node* x_node,
                        std::unordered_map<Node*, Info>* info) {
  std::vector<Node*> order;
  std::vector<std::pair<Node*, size_t>> stack{{root.get(), 0}};
  (*info)[root.get()].node = root;
  while (!stack.empty()) {
    Node* n = stack.back().first;
    const size_t i = stack.back().second;
    if (i < n->num_outputs()) {
      ++stack.back().second;
      const Edge& e = n->next_edge(i);
      Node* c = e.function.get();
      if (c && info->find(c) == info->end()) {
        (*info)[c].node = e.function;
        stack.emplace_back(c, 0);
      }
      continue;
    }
    Info& in = (*info)[n];
    if (n == x_node) {
      in.reach_x = true;
    } else if (dynamic_cast<torch::autograd::AccumulateGrad*>(n) != nullptr) {
      in.has_param = true;
    }
    for (const Edge& e : n->next_edges()) {
      if (!e.function) continue;
      const Info& ci = info->at(e.function.get());
      in.reach_x = in.reach_x || ci.reach_x;
      in.has_param = in.has_param || ci.has_param;
    }
    order.push_back(n);
    stack.pop_back();
  }
  return order;
}

}  // namespace

struct SplitBackward::State {
  at::Tensor root, input;
  struct Boundary {
    std::shared_ptr<Node> node;
    std::shared_ptr<Slot> slot;
    edge_list weight_edges;
  };
  std::vector<Boundary> deferred;
  edge_list early_edges;  // weight edges whose gradients B already computed
  variable_list early_grads;
};

SplitBackward::SplitBackward() = default;
SplitBackward::~SplitBackward() = default;

int SplitBackward::deferred_nodes() const { return st_ ? static_cast<int>(st_->deferred.size()) : 0; }

at::Tensor SplitBackward::RunInputPass(const at::Tensor& root, const at::Tensor& root_grad, const at::Tensor& input,
                                       bool split) {
  if (input_done_) throw std::logic_error("SplitBackward: the input pass ran twice");
  input_done_ = true;
  const at::Tensor g = root_grad.defined() ? root_grad : at::ones_like(root);
  auto full_backward = [&] {
    torch::autograd::backward({root}, {g});
    return input.requires_grad() ? input.grad() : at::Tensor();
  };
  if (!split || !input.requires_grad() || !root.grad_fn()) return full_backward();
  const Edge x_edge = torch::autograd::impl::gradient_edge(input);
  std::unordered_map<Node*, Info> info;
  const std::vector<Node*> order = Sort(root.grad_fn(), x_edge.function.get(), &info);
  if (!info.at(root.grad_fn().get()).reach_x) return full_backward();

  auto is_weight_edge = [&](const Edge& e) {
    if (!e.function) return false;
    const Info& ci = info.at(e.function.get());
    return !ci.reach_x && ci.has_param;
  };
  std::unordered_map<Node*, int> users;
  for (Node* n : order) {
    if (!info.at(n).reach_x) continue;
    for (const Edge& e : n->next_edges()) {
      if (is_weight_edge(e) && ++users[e.function.get()] > 1) return full_backward();
    }
  }

  auto st = std::make_unique<State>();
  st->root = root;
  st->input = input;
  edge_list outputs{x_edge};
  std::unordered_map<Node*, bool> runs_in_w;
  for (Node* n : order) {
    if (!info.at(n).reach_x) continue;
    edge_list weight_edges;
    for (const Edge& e : n->next_edges()) {
      if (is_weight_edge(e)) weight_edges.push_back(e);
    }
    if (weight_edges.empty()) continue;
    if (Deferrable(*n)) {
      auto slot = std::make_shared<Slot>();
      n->add_pre_hook(std::make_unique<CaptureHook>(slot));
      st->deferred.push_back({info.at(n).node, slot, std::move(weight_edges)});
      runs_in_w[n] = true;
    } else {
      outputs.insert(outputs.end(), weight_edges.begin(), weight_edges.end());
    }
  }
  variable_list got = torch::autograd::Engine::get_default_engine().execute(
      {torch::autograd::impl::gradient_edge(root)}, {g}, /*keep_graph=*/true, /*create_graph=*/false,
      /*accumulate_grad=*/false, outputs);
  for (size_t i = 1; i < got.size(); ++i) {
    if (!got[i].defined()) continue;
    st->early_edges.push_back(outputs[i]);
    st->early_grads.push_back(got[i]);
  }
  // Free what only B needed: the saved tensors of every input-path node W does not run.
  for (Node* n : order) {
    if (info.at(n).reach_x && !runs_in_w.count(n) && n != x_edge.function.get()) n->release_variables();
  }
  st_ = std::move(st);
  split_ = true;
  return got[0];
}

void SplitBackward::RunWeightPass() {
  if (!input_done_ || weight_done_) throw std::logic_error("SplitBackward: the weight pass runs once, after B");
  weight_done_ = true;
  if (!split_) return;
  auto& engine = torch::autograd::Engine::get_default_engine();
  edge_list roots = std::move(st_->early_edges);
  variable_list grads = std::move(st_->early_grads);
  for (auto& b : st_->deferred) {
    edge_list from;
    variable_list in;
    for (size_t i = 0; i < b.slot->grads.size(); ++i) {
      if (!b.slot->grads[i].defined()) continue;
      from.emplace_back(b.node, static_cast<uint32_t>(i));
      in.push_back(b.slot->grads[i]);
    }
    if (from.empty()) continue;
    variable_list out = engine.execute(from, in, /*keep_graph=*/false, /*create_graph=*/false,
                                       /*accumulate_grad=*/false, b.weight_edges);
    for (size_t j = 0; j < out.size(); ++j) {
      if (!out[j].defined()) continue;
      roots.push_back(b.weight_edges[j]);
      grads.push_back(out[j]);
    }
    b.slot->grads.clear();
  }
  // Parameter-only subgraphs (transposes, views, accumulators): run them all in one pass so a
  // parameter reached twice gets both contributions.
  if (!roots.empty()) {
    engine.execute(roots, grads, /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/true);
  }
  st_.reset();
}

}  // namespace scheduler
}  // namespace zeropp
