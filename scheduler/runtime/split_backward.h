// split_backward.h: one micro-batch's backward through a pipeline chunk, split into an
// input-gradient pass (B) and a weight-gradient pass (W), as zero-bubble pipelines do, on the
// autograd graph of an unmodified model.
//
// B sorts the graph once. Nodes on a path to the chunk's input carry the input gradient; an edge
// from such a node into a subgraph that reaches parameters only is a weight edge, and a node owning
// one is a boundary node (a matmul, a bias add, a layer norm). B runs autograd toward the input, so
// boundary nodes skip their weight outputs; a pre-hook keeps the gradient that reached each of them,
// and a post-hook frees every other input-path node's saved tensors as soon as it has run (as a
// backward that does not keep the graph does). W computes each boundary node's weight outputs
// directly from its saved tensors and the kept gradient (one matrix product per linear layer,
// written by the product itself into the weight's slice of its unit's flat gradient buffer, or added
// into an existing .grad (zeropp/grad_sink.h); the gradient itself for a bias add; for a
// layer norm, dgamma and dbeta from its saved input, mean and reciprocal deviation), then
// pushes the rest through the parameter-only subgraphs to autograd's accumulation (and the sink).
// Node kinds it cannot compute directly run through autograd, toward their weight edges only.
//
// Which boundary nodes are deferred: those whose weight outputs read saved activations and the
// incoming gradient but never the weights (matmuls, elementwise add/sub/mul; layer norm too when
// asked, see below). So a chunk's weights may be released between B and W, which ZeroPP does. Other
// boundary nodes get their weight-edge gradients in B; W pushes them on. After B, the saved tensors
// of every node W does not run are freed, so only what W needs stays alive.
//
// Layer norm (defer_layer_norm): W can compute dgamma and dbeta from the saved input, mean and
// reciprocal deviation without gamma. It is off by default because it costs more than it moves:
// ATen's CPU layer-norm backward computes dgamma and dbeta in the same pass as dx, so B gets no
// cheaper while W adds a pass (./zpp bench split-backward prints both: Bi + W over the whole
// backward 0.98-1.01 without, 1.00-1.03 with, over three runs).
//
// No split (B runs the whole backward, W does nothing): the input needs no gradient (the first
// stage), or a weight-edge node is shared by two boundary nodes (W could not keep their
// contributions apart without running the input path again).
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace zeropp {
namespace scheduler {

class SplitBackward {
 public:
  explicit SplitBackward(bool defer_layer_norm = false);
  ~SplitBackward();
  SplitBackward(const SplitBackward&) = delete;
  SplitBackward& operator=(const SplitBackward&) = delete;

  // B. root: the chunk's output or loss; root_grad: its gradient (undefined: ones, for a loss);
  // input: the chunk's input, a leaf. Returns d(root)/d(input), undefined if input needs no grad.
  // split=false: the whole backward now. Call once.
  at::Tensor RunInputPass(const at::Tensor& root, const at::Tensor& root_grad, const at::Tensor& input,
                          bool split = true);

  // W. Lands the weight gradients (flat gradient slices, else .grad) and frees the graph. Call once,
  // after B.
  void RunWeightPass();

  bool split() const { return split_; }
  // Boundary nodes whose weight outputs W computes (0 when not split).
  int deferred_nodes() const;
  // Weight gradients W wrote with their matrix product itself (after RunWeightPass).
  int direct_products() const { return direct_products_; }

 private:
  struct State;
  std::unique_ptr<State> st_;
  bool defer_layer_norm_ = false;
  bool split_ = false;
  bool input_done_ = false, weight_done_ = false;
  int direct_products_ = 0;
};

}  // namespace scheduler
}  // namespace zeropp
