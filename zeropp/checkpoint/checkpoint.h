// checkpoint.h: sharded, layout-independent, crash-consistent, verified checkpoints.
//
// Layout on disk (DIR is the save directory):
//   DIR/step-000005/shard-RRRRR-K.safetensors   each rank's owned state, as safetensors files laid
//                                               out as PyTorch DCP's safetensors format: the file's
//                                               __metadata__ DCP_SHARDING_INFO gives every chunk's
//                                               global saved_offsets; a chunk is an n-d box, one per
//                                               tensor name per file (a flat shard of a 2-D weight
//                                               is up to 3 row boxes, hence K)
//   DIR/step-000005/manifest.json               written last: step, layout, model fingerprint,
//                                               tensors' global shapes, every file's size and xxh64,
//                                               every rank's CPU generator state (restored when
//                                               the loading layout is the saving layout)
//   DIR/latest                                  "step-000005", replaced atomically
// Tensors: each parameter by name (a tied tensor by its first registration's name) holds the fp32
// master; "optim.exp_avg.NAME" and "optim.exp_avg_sq.NAME" the AdamW moments; a second pipeline
// stage's copy of a tied tensor is also kept, as "tied_copy.ppP.NAME" (and its moments). Keyed by name and
// global offsets, never by rank or unit, so any layout loads any checkpoint: each rank reads only
// the byte ranges that overlap what it holds.
//
// Save: every file is written into DIR/.tmp-step-N and fsynced; rank 0 then writes the manifest
// (temporary name, fsync, rename), renames the directory to step-N, fsyncs DIR, replaces `latest`
// and removes checkpoints beyond `keep`. A crash at any point leaves the previous checkpoint and
// `latest` intact. Load verifies every file's size and checksum and every header before it uses a
// byte, and refuses a checkpoint of another model. Both are collective (all ranks, same order).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zeropp/engine.h"
#include "zeropp/process_groups.h"

namespace zeropp {
namespace checkpoint {

struct SaveResult {
  std::string path;         // DIR/step-N
  int64_t bytes = 0;        // written by this rank
  double seconds = 0;       // this call, on this rank
};

// Saves the engine's state after `step` optimizer steps. `layout` is recorded (a description).
// keep > 0: remove older step directories beyond the newest `keep`. Throws std::runtime_error
// naming the file and the problem (e.g. a full disk); the previous checkpoint stays intact.
SaveResult Save(Engine& engine, ProcessGroups& groups, const std::string& dir, int64_t step,
                const std::string& layout, int keep);

// The same save in three phases, so that the writing overlaps training (asynchronous saves):
//   PendingSave p = PendingSave::Begin(...);  // collective: this rank's state copied (the stall)
//   std::thread([&] { p.Write(); })           // its files written; no communication, any thread
//   p.Commit(groups);                         // collective: checksums to rank 0, manifest, rename
// Until Commit, the save is invisible: a crash leaves the previous checkpoint as `latest`.
class PendingSave {
 public:
  PendingSave();
  PendingSave(PendingSave&&) noexcept;
  PendingSave& operator=(PendingSave&&) noexcept;
  ~PendingSave();
  static PendingSave Begin(Engine& engine, ProcessGroups& groups, const std::string& dir, int64_t step,
                           const std::string& layout, int keep);
  void Write();
  SaveResult Commit(ProcessGroups& groups);
  int64_t step() const;
  bool empty() const { return s_ == nullptr; }

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A step directory, or a save directory with `latest` (resolved). "" when `path` is a save
// directory without a checkpoint yet. Throws std::runtime_error for a bad `latest`.
std::string Resolve(const std::string& path);

// Loads a checkpoint (a step directory or a save directory) into the engine, whatever layout saved
// it; returns its step. Throws std::runtime_error "checkpoint PATH: FILE: problem" on any
// missing, truncated, corrupted or foreign file, the same on every rank.
// `layout` describes this run's layout as Save's did: when it equals the saved one, each pipeline
// rank's copy of a tensor tied across stages is restored as saved (an exact resume).
int64_t Load(Engine& engine, ProcessGroups& groups, const std::string& path, const std::string& layout);

// Read access to a checkpoint, after verifying it: every file's size and xxh64 against the
// manifest and every safetensors header (throws std::runtime_error "checkpoint DIR: FILE: problem"
// before any byte is used). Reads only the byte ranges asked for. Not collective.
class Reader {
 public:
  explicit Reader(const std::string& path);  // a step directory or a save directory's latest
  ~Reader();
  const std::string& dir() const;
  int64_t step() const;
  const std::string& layout() const;
  const std::string& model_fingerprint() const;
  // Global shapes of the model's parameters by every registered name (from the manifest).
  const std::map<std::string, std::vector<int64_t>>& model_shapes() const;
  bool Has(const std::string& key) const;
  // Each saving rank's default CPU generator state (base64), in rank order; empty if not saved.
  const std::vector<std::string>& rng_cpu() const;
  std::vector<std::string> Keys() const;  // every saved tensor key, sorted
  // Elements [a, b) of saved tensor `key` (flattened, global `shape`) into dst (fp32). Throws when
  // the saved chunks do not cover the range exactly once.
  void Read(const std::string& key, const std::vector<int64_t>& shape, int64_t a, int64_t b, float* dst) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace checkpoint
}  // namespace zeropp
