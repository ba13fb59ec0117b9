#include "scheduler/runtime/split_backward.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/ops/mm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/sum_to_size.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/generated/Functions.h>
#include <torch/csrc/autograd/variable.h>

#include "zeropp/grad_sink.h"

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

// Frees a node's saved tensors as soon as it has run in B (what the engine does for every node when
// it does not keep the graph), so B's memory, and its cache footprint, shrinks as it goes.
class ReleaseHook : public torch::autograd::FunctionPostHook {
 public:
  explicit ReleaseHook(Node* node) : node_(node) {}
  variable_list operator()(const variable_list& outputs, const variable_list& /*inputs*/) override {
    node_->release_variables();
    return outputs;
  }

 private:
  Node* node_;  // the node this hook belongs to (it owns the hook)
};

// Node kinds whose weight outputs need the incoming gradient and saved activations only. Layer
// norm only when asked: ATen's CPU backward takes gamma's data pointer even for dgamma alone (it
// fails once the chunk's weights are freed), so W never runs it; it computes dgamma and dbeta
// itself (LayerNormWeightGrads), never reading gamma.
bool Deferrable(const Node& n, bool layer_norm) {
  std::string name = n.name();
  const size_t colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  return name == "AddmmBackward0" || name == "MmBackward0" || name == "BmmBackward0" || name == "AddBackward0" ||
         name == "SubBackward0" || name == "MulBackward0" || (layer_norm && name == "NativeLayerNormBackward0");
}

// Layer norm's weight outputs from the gradient g of its output, as the node's weight outputs ask,
// indexed as its outputs: [1] dgamma = the sum over the leading dims of g * (x - mean) * rstd, [2]
// dbeta = the sum of g. Neither depends on gamma, so ATen's fused backward computes them in one
// pass (dx not asked for) with a gamma of ones standing in for the chunk's weight, which may be
// freed by now.
std::array<at::Tensor, 3> LayerNormWeightGrads(const std::shared_ptr<Node>& node, const std::vector<size_t>& outputs,
                                               const at::Tensor& g) {
  auto* f = static_cast<torch::autograd::generated::NativeLayerNormBackward0*>(node.get());
  const at::Tensor x = f->input_.unpack(node);
  std::vector<int64_t> shape;
  for (const c10::SymInt& d : f->normalized_shape) shape.push_back(d.expect_int());
  const at::Tensor ones = at::ones(shape, x.options());
  const bool want_gamma = std::find(outputs.begin(), outputs.end(), 1) != outputs.end();
  const bool want_beta = std::find(outputs.begin(), outputs.end(), 2) != outputs.end();
  auto [dx, dgamma, dbeta] = at::native_layer_norm_backward(g, x, shape, f->result1_.unpack(node), f->result2_.unpack(node),
                                                            ones, ones, {false, want_gamma, want_beta});
  return {at::Tensor(), dgamma, dbeta};
}

// d(a @ b)/db = a^T @ g and d/da = g @ b^T, each computed in the memory order of the operand it is
// the gradient of (a transposed weight view gets a transposed product), as autograd's own matmul
// backward does, so the accumulation into .grad stays a contiguous add.
bool Transposed(const std::vector<c10::SymInt>& strides) {
  return strides.size() == 2 && strides[0] == 1 && strides[1] != 1;
}
at::Tensor MatmulGradA(const at::Tensor& g, const at::Tensor& b, bool a_transposed) {
  return a_transposed ? at::mm(b, g.t()).t() : at::mm(g, b.t());
}
at::Tensor MatmulGradB(const at::Tensor& g, const at::Tensor& a, bool b_transposed) {
  return b_transposed ? at::mm(g.t(), a).t() : at::mm(a.t(), g);
}

// The gradient of a deferred node's output `i` (a weight edge) from the gradient that reached it,
// computed directly from its saved tensors: one matrix product for a matmul, the gradient itself
// (or a product) for an elementwise add/sub/mul. Undefined if the node is of another kind. Doing
// this instead of one autograd call per node saves the engine's per-call setup and graph walk.
at::Tensor WeightGrad(const std::shared_ptr<Node>& node, size_t i, const at::Tensor& g) {
  namespace gen = torch::autograd::generated;
  Node* n = node.get();
  if (auto* f = dynamic_cast<gen::MmBackward0*>(n)) {
    if (f->self_layout != at::kStrided || f->mat2_layout != at::kStrided) return at::Tensor();
    return i == 0 ? MatmulGradA(g, f->mat2_.unpack(node), false)
                  : MatmulGradB(g, f->self_.unpack(node), Transposed(f->mat2_sym_strides));
  }
  if (auto* f = dynamic_cast<gen::AddmmBackward0*>(n)) {
    if (f->mat1_layout != at::kStrided || f->mat2_layout != at::kStrided) return at::Tensor();
    if (i == 0) return f->beta.equal(1) ? g : g * f->beta;
    at::Tensor r = i == 1 ? MatmulGradA(g, f->mat2_.unpack(node), Transposed(f->mat1_sym_strides))
                          : MatmulGradB(g, f->mat1_.unpack(node), Transposed(f->mat2_sym_strides));
    return f->alpha.equal(1) ? r : r * f->alpha;
  }
  if (auto* f = dynamic_cast<gen::AddBackward0*>(n)) return i == 0 || f->alpha.equal(1) ? g : g * f->alpha;
  if (auto* f = dynamic_cast<gen::SubBackward0*>(n)) return i == 0 ? g : -(f->alpha.equal(1) ? g : g * f->alpha);
  if (auto* f = dynamic_cast<gen::MulBackward0*>(n)) {
    return i == 0 ? g * f->other_.unpack(node).conj() : g * f->self_.unpack(node).conj();
  }
  return at::Tensor();  // BmmBackward0 and the rest: through autograd
}

// Whether WeightGrad computes every weight output of `n` (decided before any is added into .grad).
bool DirectlyComputable(Node* n) {
  namespace gen = torch::autograd::generated;
  if (auto* f = dynamic_cast<gen::MmBackward0*>(n)) return f->self_layout == at::kStrided && f->mat2_layout == at::kStrided;
  if (auto* f = dynamic_cast<gen::AddmmBackward0*>(n)) {
    return f->mat1_layout == at::kStrided && f->mat2_layout == at::kStrided;
  }
  return dynamic_cast<gen::AddBackward0*>(n) || dynamic_cast<gen::SubBackward0*>(n) || dynamic_cast<gen::MulBackward0*>(n) ||
         dynamic_cast<gen::NativeLayerNormBackward0*>(n);
}

bool NoHooks(Node& n) {
  return n.pre_hooks().empty() && n.tensor_pre_hooks().empty() && n.retains_grad_hooks().empty() &&
         n.post_hooks().empty();
}

// Where W may write a weight gradient straight into the parameter's gradient, as autograd's
// accumulation would: the edge leads to the parameter's accumulator, directly or through one
// transpose, and nothing watches either node. The place is the parameter's slice of its unit's
// flat gradient buffer when it has one (grad_sink.h; *overwrite when nothing landed there yet),
// else .grad when it exists with the parameter's dtype and a dense layout (added into). Undefined
// otherwise (autograd then accumulates). `transposed`: the edge's input is the target's transpose.
at::Tensor DirectGradTarget(const Edge& e, bool* transposed, bool* overwrite) {
  Node* n = e.function.get();
  *transposed = false;
  *overwrite = false;
  if (auto* t = dynamic_cast<torch::autograd::generated::TBackward0*>(n)) {
    if (!NoHooks(*t) || t->num_outputs() != 1) return at::Tensor();
    n = t->next_edge(0).function.get();
    *transposed = true;
  }
  auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(n);
  if (acc == nullptr || !NoHooks(*acc)) return at::Tensor();
  if (acc->tensor_post_acc_grad_hooks() != nullptr) return zeropp::GradSinkTarget(acc->variable, overwrite);
  const at::Tensor& grad = acc->variable.grad();
  if (!grad.defined() || grad.scalar_type() != acc->variable.scalar_type() || !grad.is_contiguous() ||
      grad.layout() != at::kStrided) {
    return at::Tensor();
  }
  return grad;
}

// As the engine does with a node's outputs: reduce a broadcast gradient to the input's shape and
// cast it to the input's dtype.
at::Tensor FitTo(const Edge& e, at::Tensor g) {
  const auto& meta = e.function->input_metadata(e.input_nr);
  if (!meta.is_same_shape(g)) g = g.sum_to_size(C10_AS_INTARRAYREF_SLOW(meta.shape_as_dim_vector()));
  if (g.scalar_type() != c10::typeMetaToScalarType(meta.dtype())) g = g.to(c10::typeMetaToScalarType(meta.dtype()));
  return g;
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
    std::vector<size_t> weight_outputs;  // each weight edge's index among the node's outputs
  };
  std::vector<Boundary> deferred;
  edge_list early_edges;  // weight edges whose gradients B already computed
  variable_list early_grads;
};

SplitBackward::SplitBackward(bool defer_layer_norm) : defer_layer_norm_(defer_layer_norm) {}
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
    std::vector<size_t> weight_outputs;
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      if (!is_weight_edge(n->next_edge(i))) continue;
      weight_edges.push_back(n->next_edge(i));
      weight_outputs.push_back(i);
    }
    if (weight_edges.empty()) {
      if (n != x_edge.function.get()) n->add_post_hook(std::make_unique<ReleaseHook>(n));
      continue;
    }
    if (Deferrable(*n, defer_layer_norm_)) {
      auto slot = std::make_shared<Slot>();
      n->add_pre_hook(std::make_unique<CaptureHook>(slot));
      st->deferred.push_back({info.at(n).node, slot, std::move(weight_edges), std::move(weight_outputs)});
      runs_in_w[n] = true;
    } else {
      outputs.insert(outputs.end(), weight_edges.begin(), weight_edges.end());
      n->add_post_hook(std::make_unique<ReleaseHook>(n));
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
  // The products below must not record autograd history (the engine runs nodes without it too):
  // an in-place product into .grad under grad mode would chain every step's graph to it.
  c10::NoGradGuard no_grad;
  edge_list roots = std::move(st_->early_edges);
  variable_list grads = std::move(st_->early_grads);
  for (auto& b : st_->deferred) {
    // The direct products, when the node is of a kind computed directly. A linear layer's weight
    // gradient is accumulated by the product itself (into its flat gradient slice or .grad: mm
    // where nothing landed yet, else addmm; no temporary, no second pass over it), which
    // autograd's whole backward cannot do.
    // The node's first output's gradient only (layer norm's mean and deviation outputs get none;
    // if they ever did, the autograd fallback below would read gamma, as B does).
    bool only_first = !b.slot->grads.empty() && b.slot->grads[0].defined();
    for (size_t i = 1; i < b.slot->grads.size(); ++i) only_first = only_first && !b.slot->grads[i].defined();
    if (only_first && DirectlyComputable(b.node.get())) {
      const at::Tensor& g = b.slot->grads[0];
      auto* mm = dynamic_cast<torch::autograd::generated::MmBackward0*>(b.node.get());
      auto* addmm = dynamic_cast<torch::autograd::generated::AddmmBackward0*>(b.node.get());
      // Layer norm's dgamma and dbeta come from one call, not one per output.
      const bool layer_norm = dynamic_cast<torch::autograd::generated::NativeLayerNormBackward0*>(b.node.get()) != nullptr;
      const std::array<at::Tensor, 3> ln =
          layer_norm ? LayerNormWeightGrads(b.node, b.weight_outputs, g) : std::array<at::Tensor, 3>{};
      std::vector<at::Tensor> direct;
      for (size_t j = 0; j < b.weight_outputs.size(); ++j) {
        if (layer_norm) {
          direct.push_back(FitTo(b.weight_edges[j], ln.at(b.weight_outputs[j])));
          continue;
        }
        bool transposed = false, overwrite = false;
        at::Tensor target;
        // The second factor's gradient of a matmul (mm(a, mat2), or a linear layer's
        // addmm(bias, a, mat2) at alpha 1): a^T g.
        if ((mm != nullptr && b.weight_outputs[j] == 1) ||
            (addmm != nullptr && b.weight_outputs[j] == 2 && addmm->alpha.equal(1))) {
          target = DirectGradTarget(b.weight_edges[j], &transposed, &overwrite);
        }
        if (target.defined()) {
          const at::Tensor a = mm != nullptr ? mm->self_.unpack(b.node) : addmm->mat1_.unpack(b.node);
          const at::Tensor m1 = transposed ? g.t() : a.t(), m2 = transposed ? a : g;
          if (overwrite) {
            at::mm_out(target, m1, m2);
          } else {
            target.addmm_(m1, m2);
          }
          direct.emplace_back();  // done
          ++direct_products_;
          continue;
        }
        direct.push_back(FitTo(b.weight_edges[j], WeightGrad(b.node, b.weight_outputs[j], g)));
      }
      for (size_t j = 0; j < direct.size(); ++j) {
        if (!direct[j].defined()) continue;  // already added into .grad
        roots.push_back(b.weight_edges[j]);
        grads.push_back(std::move(direct[j]));
      }
      b.slot->grads.clear();
      b.node->release_variables();
      continue;
    }
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
