#include "zeropp/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "xxhash.h"
#include "zeropp/checkpoint/safetensors.h"

namespace zeropp {
namespace checkpoint {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kManifest = "manifest.json";
constexpr const char* kFormat = "zeropp-checkpoint";
constexpr int kVersion = 1;

// An n-d box of a tensor: global offsets and sizes.
struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// The flat element range [a, b) of a tensor of `shape` (C order) as at most 2*ndim-1 boxes.
void FlatRangeToBoxes(const std::vector<int64_t>& shape, int64_t a, int64_t b, std::vector<int64_t> prefix,
                      std::vector<Box>* out) {
  if (a >= b) return;
  if (shape.size() <= 1) {
    Box box{prefix, std::vector<int64_t>(prefix.size(), 1)};
    if (!shape.empty()) {
      box.offsets.push_back(a);
      box.sizes.push_back(b - a);
    }
    out->push_back(std::move(box));
    return;
  }
  const std::vector<int64_t> rest(shape.begin() + 1, shape.end());
  int64_t inner = 1;
  for (int64_t d : rest) inner *= d;
  int64_t r0 = a / inner;
  const int64_t r1 = (b - 1) / inner;
  auto with = [&](int64_t row) {
    std::vector<int64_t> p = prefix;
    p.push_back(row);
    return p;
  };
  if (r0 == r1) {
    FlatRangeToBoxes(rest, a - r0 * inner, b - r0 * inner, with(r0), out);
    return;
  }
  if (a % inner != 0) {
    FlatRangeToBoxes(rest, a % inner, inner, with(r0), out);
    ++r0;
  }
  const int64_t whole_end = b % inner == 0 ? r1 + 1 : r1;
  if (whole_end > r0) {
    Box box{prefix, std::vector<int64_t>(prefix.size(), 1)};
    box.offsets.push_back(r0);
    box.sizes.push_back(whole_end - r0);
    for (int64_t d : rest) {
      box.offsets.push_back(0);
      box.sizes.push_back(d);
    }
    out->push_back(std::move(box));
  }
  if (b % inner != 0) FlatRangeToBoxes(rest, 0, b % inner, with(r1), out);
}

std::vector<std::string> AllGatherStrings(Communicator& comm, const std::string& mine) {
  const int64_t longest = static_cast<int64_t>(MaxOverRanks(comm, static_cast<double>(mine.size())));
  at::Tensor in = at::zeros({longest + 8}, at::TensorOptions().dtype(at::kByte));
  const int64_t n = static_cast<int64_t>(mine.size());
  std::memcpy(in.data_ptr(), &n, 8);
  std::memcpy(static_cast<char*>(in.data_ptr()) + 8, mine.data(), mine.size());
  at::Tensor out = at::zeros({comm.size() * (longest + 8)}, in.options());
  comm.AllGather(out, in)->Wait();
  std::vector<std::string> all;
  for (int r = 0; r < comm.size(); ++r) {
    const char* p = static_cast<const char*>(out.data_ptr()) + r * (longest + 8);
    int64_t len = 0;
    std::memcpy(&len, p, 8);
    all.emplace_back(p + 8, static_cast<size_t>(len));
  }
  return all;
}

// The default CPU generator's state (what dropout and at::rand draw from), base64 for the manifest.
std::string CpuRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor state = gen.get_state();
  return absl::Base64Escape(absl::string_view(static_cast<const char*>(state.data_ptr()), state.numel()));
}

void SetCpuRngState(const std::string& b64, const std::string& where) {
  std::string bytes;
  if (!absl::Base64Unescape(b64, &bytes)) throw std::runtime_error(where + ": rng state is not base64");
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception&) {
    throw std::runtime_error(absl::StrCat(where, ": rng state of ", bytes.size(), " bytes is not a CPU generator state"));
  }
}

std::string FileXxh64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    XXH64_update(st, buf.data(), static_cast<size_t>(in.gcount()));
  }
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return absl::StrFormat("%016x", h);
}

void FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void WriteFileAtomically(const std::string& path, const std::string& text,
                         const std::function<void()>& before_rename = nullptr) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(tmp + ": write failed (disk full?)");
  }
  FsyncPath(tmp);
  if (before_rename) before_rename();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": rename failed");
}

std::string StepName(int64_t step) { return absl::StrFormat("step-%06d", step); }

// Fault injection for the crash-consistency test: ZEROPP_TEST_CRASH_IN_SAVE="STEP:POINT" kills
// this process (SIGKILL, as a node failure would) at POINT of the save of STEP: "shards" (rank 1,
// after its first shard file), "manifest" (rank 0, manifest written under its temporary name),
// "rename" (rank 0, step directory renamed, `latest` not yet updated).
void CrashPointForTests(int64_t step, const char* point, int rank, int at_rank) {
  const char* spec = std::getenv("ZEROPP_TEST_CRASH_IN_SAVE");
  if (spec && rank == at_rank && std::string(spec) == absl::StrCat(step, ":", point)) ::kill(::getpid(), SIGKILL);
}

// The key of pipeline rank p's copy of a tensor tied across stages.
std::string CopyKey(int p, const std::string& name) { return absl::StrCat("tied_copy.pp", p, ".", name); }

// The runs of a box that are contiguous in the tensor's flat order: (flat start, element index in
// the box, length). Trailing dimensions the box spans whole merge into one run.
template <typename F>
void ForEachRun(const std::vector<int64_t>& shape, const Box& box, F fn) {
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    fn(0, 0, 1);
    return;
  }
  int k = nd - 1;  // runs span dims k.. (the box covers dims k+1.. whole)
  while (k > 0 && box.sizes[k] == shape[k] && box.offsets[k] == 0) --k;
  int64_t tail = 1;
  for (int d = k + 1; d < nd; ++d) tail *= shape[d];
  const int64_t run = box.sizes[k] * tail;
  std::vector<int64_t> idx(k, 0);  // over dims 0..k-1 of the box
  int64_t in_box = 0;
  while (true) {
    int64_t flat = 0;
    for (int d = 0; d < nd; ++d) {
      const int64_t i = d < k ? box.offsets[d] + idx[d] : (d == k ? box.offsets[d] : 0);
      flat = flat * shape[d] + i;
    }
    fn(flat, in_box, run);
    in_box += run;
    int d = k - 1;
    while (d >= 0 && ++idx[d] == box.sizes[d]) idx[d--] = 0;
    if (d < 0) break;
  }
}

}  // namespace

struct PendingSave::State {
  std::string dir, tmp_dir, final_dir, layout, fingerprint;
  int64_t step = 0;
  int keep = 0, rank = 0;
  std::chrono::steady_clock::time_point t0;
  // This rank's chunks (a snapshot), grouped into files by box index (one chunk per name a file).
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> files;
  std::vector<Json> sharding;
  std::string rng_cpu;  // this rank's default CPU generator state at the step boundary, base64
  Json shapes = Json::object();
  Json written = Json::array();
  int64_t bytes = 0;
  std::string error;
  bool wrote = false;
};

PendingSave::PendingSave() = default;
PendingSave::PendingSave(PendingSave&&) noexcept = default;
PendingSave& PendingSave::operator=(PendingSave&&) noexcept = default;
PendingSave::~PendingSave() = default;

PendingSave PendingSave::Begin(Engine& engine, ProcessGroups& groups, const std::string& dir, int64_t step,
                               const std::string& layout, int keep) {
  PendingSave p;
  p.s_ = std::make_unique<State>();
  State& st = *p.s_;
  st.t0 = std::chrono::steady_clock::now();
  st.dir = dir;
  st.step = step;
  st.layout = layout;
  st.keep = keep;
  st.rank = groups.rank();
  st.fingerprint = engine.ModelFingerprint();
  st.rng_cpu = CpuRngState();
  Communicator& world = groups.world();
  const ParallelConfig& cfg = groups.config();
  const bool zero1 = cfg.dp_mode == DpMode::kZero1 && cfg.dp > 1;
  const bool writer = zero1 || cfg.CoordOf(st.rank).dp_index == 0;  // dp replicas hold identical state
  const int pp_index = cfg.CoordOf(st.rank).pp_index;
  st.final_dir = (fs::path(dir) / StepName(step)).string();
  st.tmp_dir = (fs::path(dir) / (".tmp-" + StepName(step))).string();
  std::string error;
  if (st.rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::remove_all(st.tmp_dir, ec);
    fs::create_directories(st.tmp_dir, ec);
    if (ec) error = absl::StrCat(st.tmp_dir, ": cannot create: ", ec.message());
  }
  if (MaxOverRanks(world, error.empty() ? 0 : 1) > 0) {
    throw std::runtime_error(absl::StrCat("checkpoint save ", dir, ": ",
                                          error.empty() ? "rank 0 could not create the directory" : error));
  }
  auto add = [&](const std::string& name, const std::vector<int64_t>& shape, const float* base, int64_t a, int64_t b) {
    std::vector<Box> boxes;
    FlatRangeToBoxes(shape, a, b, {}, &boxes);
    int64_t at = 0;
    for (size_t k = 0; k < boxes.size(); ++k) {
      if (st.files.size() <= k) {
        st.files.resize(k + 1);
        st.sharding.resize(k + 1, Json::object());
      }
      // A copy: training may go on while the files are written.
      at::Tensor t = at::from_blob(const_cast<float*>(base) + at, boxes[k].sizes, at::kFloat).clone();
      st.files[k].emplace_back(name, t);
      st.sharding[k][name] = {{"saved_offsets", boxes[k].offsets}};
      at += boxes[k].numel();
    }
  };
  if (writer) {
    engine.VisitState(false, [&](const FlatParam& f, int64_t own_begin, int64_t own_end, const at::Tensor& master,
                                 const at::Tensor& moments) {
      const float* m = master.data_ptr<float>();
      const float* avg = moments.data_ptr<float>();
      const float* sq = avg + (own_end - own_begin);
      for (const FlatEntry& e : f.entries()) {
        const int64_t a = std::max(own_begin, e.offset), b = std::min(own_end, e.offset + e.numel);
        if (a >= b) continue;
        // A cross-stage copy of a tied tensor is saved under its own key: the vectorised AdamW
        // may round the two copies differently, so an exact resume on the same layout needs both;
        // other layouts load the tensor by its name.
        const std::string key = e.norm_excluded ? CopyKey(pp_index, e.name) : e.name;
        add(key, e.shape, m + (a - f.master_begin()), a - e.offset, b - e.offset);
        add("optim.exp_avg." + key, e.shape, avg + (a - own_begin), a - e.offset, b - e.offset);
        add("optim.exp_avg_sq." + key, e.shape, sq + (a - own_begin), a - e.offset, b - e.offset);
      }
    });
  }
  for (const auto& kv : engine.model().named_parameters(/*recurse=*/true)) st.shapes[kv.key()] = kv.value().sizes().vec();
  return p;
}

void PendingSave::Write() {
  State& st = *s_;
  try {
    for (size_t k = 0; k < st.files.size(); ++k) {
      const std::string name = absl::StrFormat("shard-%05d-%d.safetensors", st.rank, static_cast<int>(k));
      const std::string path = (fs::path(st.tmp_dir) / name).string();
      uint64_t sum = 0;
      const int64_t n = WriteSafetensors(path, st.files[k], {{"DCP_SHARDING_INFO", st.sharding[k].dump()},
                                                             {"DCP_VERSION", "1.0"}, {"format", "pt"}}, &sum);
      st.bytes += n;
      st.written.push_back({{"path", name}, {"bytes", n}, {"xxh64", absl::StrFormat("%016x", sum)}});
      st.files[k].clear();  // the snapshot's memory goes as soon as its file is on disk
      CrashPointForTests(st.step, "shards", st.rank, 1);
    }
  } catch (const std::exception& e) {
    st.error = e.what();
  }
  st.wrote = true;
}

SaveResult PendingSave::Commit(ProcessGroups& groups) {
  State& st = *s_;
  Communicator& world = groups.world();
  if (!st.wrote) st.error = "Commit before Write";
  if (MaxOverRanks(world, st.error.empty() ? 0 : 1) > 0) {
    if (st.rank == 0) {
      std::error_code ec;
      fs::remove_all(st.tmp_dir, ec);  // the unfinished files; the previous checkpoint is untouched
    }
    throw std::runtime_error(absl::StrCat("checkpoint save ", st.dir, ": ",
                                          st.error.empty() ? "another rank failed to write its shard" : st.error,
                                          "; the previous checkpoint is intact"));
  }
  const std::vector<std::string> all =
      AllGatherStrings(world, Json{{"files", st.written}, {"rng_cpu", st.rng_cpu}}.dump());
  std::string error;
  if (st.rank == 0) {
    try {
      Json manifest = {{"format", kFormat}, {"version", kVersion}, {"step", st.step}, {"layout", st.layout},
                       {"model", {{"fingerprint", st.fingerprint}}}, {"tensors", st.shapes},
                       {"files", Json::array()}, {"rng", {{"world", all.size()}, {"cpu", Json::array()}}}};
      for (const std::string& s : all) {  // in rank order
        const Json r = Json::parse(s);
        for (const auto& f : r.at("files")) manifest["files"].push_back(f);
        manifest["rng"]["cpu"].push_back(r.at("rng_cpu"));
      }
      WriteFileAtomically((fs::path(st.tmp_dir) / kManifest).string(), manifest.dump(1),
                          [&] { CrashPointForTests(st.step, "manifest", st.rank, 0); });
      FsyncPath(st.tmp_dir);
      std::error_code ec;
      fs::remove_all(st.final_dir, ec);
      fs::rename(st.tmp_dir, st.final_dir, ec);
      if (ec) throw std::runtime_error(st.final_dir + ": rename failed: " + ec.message());
      FsyncPath(st.dir);
      CrashPointForTests(st.step, "rename", st.rank, 0);
      WriteFileAtomically((fs::path(st.dir) / "latest").string(), StepName(st.step) + "\n");
      FsyncPath(st.dir);
      if (st.keep > 0) {
        std::vector<std::string> steps;
        for (const auto& entry : fs::directory_iterator(st.dir)) {
          const std::string n = entry.path().filename().string();
          if (n.rfind("step-", 0) == 0 && fs::exists(entry.path() / kManifest)) steps.push_back(n);
        }
        std::sort(steps.begin(), steps.end());
        for (size_t i = 0; i + st.keep < steps.size(); ++i) fs::remove_all(fs::path(st.dir) / steps[i], ec);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (MaxOverRanks(world, error.empty() ? 0 : 1) > 0) {
    throw std::runtime_error(absl::StrCat("checkpoint save ", st.dir, ": ",
                                          error.empty() ? "rank 0 failed to commit the manifest" : error));
  }
  SaveResult r;
  r.path = st.final_dir;
  r.bytes = st.bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.t0).count();
  return r;
}

int64_t PendingSave::step() const { return s_->step; }

SaveResult Save(Engine& engine, ProcessGroups& groups, const std::string& dir, int64_t step, const std::string& layout,
                int keep) {
  PendingSave p = PendingSave::Begin(engine, groups, dir, step, layout, keep);
  p.Write();
  return p.Commit(groups);
}

std::string Resolve(const std::string& path) {
  if (fs::exists(fs::path(path) / kManifest)) return path;
  const fs::path latest = fs::path(path) / "latest";
  if (!fs::exists(latest)) return "";
  std::ifstream in(latest);
  std::string name;
  in >> name;
  if (name.rfind("step-", 0) != 0 || name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
    throw std::runtime_error(absl::StrCat("checkpoint ", path, ": latest names '", name, "', expected step-NNNNNN"));
  }
  return (fs::path(path) / name).string();
}

struct Reader::Impl {
  std::string dir;
  Json manifest;
  int64_t step = 0;
  std::string layout, fingerprint;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<std::string> rng_cpu;  // by saving rank; empty when the manifest has none
  std::vector<SafetensorsFile> files;
  struct Chunk {
    int file, tensor;
    Box box;
  };
  std::map<std::string, std::vector<Chunk>> index;
  [[noreturn]] void Fail(const std::string& what) const { throw std::runtime_error(absl::StrCat("checkpoint ", dir, ": ", what)); }
};

Reader::Reader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.dir = Resolve(path);
  if (im.dir.empty()) {
    im.dir = path;
    bool shards = false;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(path, ec)) shards = shards || e.path().extension() == ".safetensors";
    im.Fail(shards ? "manifest.json: missing (an unfinished save?)" : "no checkpoint (neither manifest.json nor latest)");
  }
  {
    std::ifstream in(fs::path(im.dir) / kManifest);
    if (!in) im.Fail("manifest.json: missing (an unfinished save?)");
    try {
      im.manifest = Json::parse(in);
    } catch (const std::exception& e) {
      im.Fail(absl::StrCat("manifest.json: not valid JSON: ", e.what()));
    }
  }
  const Json& m = im.manifest;
  if (!m.is_object() || m.value("format", "") != kFormat || m.value("version", 0) != kVersion) {
    im.Fail(absl::StrCat("manifest.json: expected format ", kFormat, " version ", kVersion));
  }
  try {
    im.step = m.at("step").get<int64_t>();
    im.layout = m.value("layout", "");
    im.fingerprint = m.at("model").value("fingerprint", "");
    for (auto it = m.at("tensors").begin(); it != m.at("tensors").end(); ++it) {
      im.shapes[it.key()] = it.value().get<std::vector<int64_t>>();
    }
    if (m.contains("rng")) im.rng_cpu = m.at("rng").at("cpu").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    im.Fail(absl::StrCat("manifest.json: missing or malformed step, model, tensors or rng: ", e.what()));
  }
  for (const auto& f : m["files"]) {
    const std::string name = f.value("path", "");
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      im.Fail(absl::StrCat("manifest.json: names '", name, "' outside the checkpoint directory"));
    }
    const std::string p = (fs::path(im.dir) / name).string();
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) im.Fail(name + ": missing");
    if (static_cast<int64_t>(size) != f.value("bytes", int64_t{-1})) {
      im.Fail(absl::StrCat(name, ": ", size, " bytes, the manifest says ", f.value("bytes", int64_t{-1}),
                           " (truncated or replaced)"));
    }
    const std::string sum = FileXxh64(p);
    if (sum != f.value("xxh64", "")) {
      im.Fail(absl::StrCat(name, ": xxh64 ", sum, ", the manifest says ", f.value("xxh64", ""), " (corrupted)"));
    }
    try {
      im.files.push_back(ReadSafetensorsHeader(p));
    } catch (const std::exception& e) {
      im.Fail(std::string(e.what()).substr(im.dir.size() + 1));
    }
  }
  for (size_t fi = 0; fi < im.files.size(); ++fi) {
    const SafetensorsFile& f = im.files[fi];
    const std::string fname = fs::path(f.path).filename().string();
    Json info = Json::object();
    auto it = f.metadata.find("DCP_SHARDING_INFO");
    if (it != f.metadata.end()) info = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    for (size_t ti = 0; ti < f.tensors.size(); ++ti) {
      const SafetensorsEntry& e = f.tensors[ti];
      if (e.dtype != "F32") im.Fail(absl::StrCat(fname, ": tensor ", e.name, " is ", e.dtype, ", expected F32"));
      Box box;
      box.sizes = e.shape;
      if (info.is_object() && info.contains(e.name)) {
        try {
          box.offsets = info[e.name]["saved_offsets"].get<std::vector<int64_t>>();
        } catch (const std::exception&) {
          im.Fail(absl::StrCat(fname, ": DCP_SHARDING_INFO of ", e.name, " has no saved_offsets list"));
        }
      } else {
        box.offsets.assign(e.shape.size(), 0);
      }
      if (box.offsets.size() != box.sizes.size()) {
        im.Fail(absl::StrCat(fname, ": tensor ", e.name, " has ", box.offsets.size(), " saved offsets for ",
                             box.sizes.size(), " dimensions"));
      }
      im.index[e.name].push_back({static_cast<int>(fi), static_cast<int>(ti), box});
    }
  }
}

Reader::~Reader() = default;
const std::string& Reader::dir() const { return impl_->dir; }
int64_t Reader::step() const { return impl_->step; }
const std::string& Reader::layout() const { return impl_->layout; }
const std::string& Reader::model_fingerprint() const { return impl_->fingerprint; }
const std::map<std::string, std::vector<int64_t>>& Reader::model_shapes() const { return impl_->shapes; }
bool Reader::Has(const std::string& key) const { return impl_->index.count(key) > 0; }
const std::vector<std::string>& Reader::rng_cpu() const { return impl_->rng_cpu; }

std::vector<std::string> Reader::Keys() const {
  std::vector<std::string> keys;
  for (const auto& kv : impl_->index) keys.push_back(kv.first);
  return keys;
}

void Reader::Read(const std::string& key, const std::vector<int64_t>& shape, int64_t a, int64_t b, float* dst) const {
  const Impl& im = *impl_;
  auto it = im.index.find(key);
  if (it == im.index.end()) im.Fail(absl::StrCat("no saved chunk of ", key));
  int64_t covered = 0;
  for (const Impl::Chunk& c : it->second) {
    const std::string fname = fs::path(im.files[c.file].path).filename().string();
    if (c.box.offsets.size() != shape.size()) {
      im.Fail(absl::StrCat(fname, ": chunk of ", key, " has ", c.box.offsets.size(), " dimensions, the tensor ",
                           shape.size()));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (c.box.offsets[d] < 0 || c.box.offsets[d] + c.box.sizes[d] > shape[d]) {
        im.Fail(absl::StrCat(fname, ": chunk of ", key, " lies outside the tensor's shape (offsets out of range)"));
      }
    }
    ForEachRun(shape, c.box, [&](int64_t flat, int64_t in_box, int64_t len) {
      const int64_t lo = std::max(flat, a), hi = std::min(flat + len, b);
      if (lo >= hi) return;
      im.files[c.file].ReadElements(c.tensor, in_box + (lo - flat), hi - lo, dst + (lo - a));
      covered += hi - lo;
    });
  }
  if (covered != b - a) {
    im.Fail(absl::StrCat("elements [", a, ", ", b, ") of ", key, ": the saved chunks cover ", covered, " of ", b - a,
                         " (missing or overlapping chunks)"));
  }
}

int64_t Load(Engine& engine, ProcessGroups& groups, const std::string& path, const std::string& layout) {
  // Every rank verifies everything it will use; the checks are deterministic, so every rank
  // refuses a bad checkpoint with the same message before any byte is used.
  const Reader reader(path);
  if (reader.model_fingerprint() != engine.ModelFingerprint()) {
    throw std::runtime_error(absl::StrCat("checkpoint ", reader.dir(), ": saved from a different model (fingerprint ",
                                          reader.model_fingerprint(), ", this model ", engine.ModelFingerprint(),
                                          ": parameter names, shapes, dtypes or frozen flags differ)"));
  }
  // This rank's own copies of cross-stage tied tensors, when the checkpoint has the same layout.
  const bool same_layout = reader.layout() == layout;
  const int pp_index = groups.config().CoordOf(groups.rank()).pp_index;
  engine.VisitState(true, [&](const FlatParam& f, int64_t own_begin, int64_t own_end, const at::Tensor& master,
                              const at::Tensor& moments) {
    float* m = master.data_ptr<float>();
    float* avg = moments.data_ptr<float>();
    float* sq = avg + (own_end - own_begin);
    for (const FlatEntry& e : f.entries()) {
      const std::string copy = CopyKey(pp_index, e.name);
      const std::string key = e.norm_excluded && same_layout && reader.Has(copy) ? copy : e.name;
      const int64_t sb = f.master_begin(), se = sb + f.master_numel();
      int64_t a = std::max(sb, e.offset), b = std::min(se, e.offset + e.numel);
      if (a < b) reader.Read(key, e.shape, a - e.offset, b - e.offset, m + (a - sb));
      a = std::max(own_begin, e.offset);
      b = std::min(own_end, e.offset + e.numel);
      if (a < b) {
        reader.Read("optim.exp_avg." + key, e.shape, a - e.offset, b - e.offset, avg + (a - own_begin));
        reader.Read("optim.exp_avg_sq." + key, e.shape, a - e.offset, b - e.offset, sq + (a - own_begin));
      }
    }
  });
  engine.set_optimizer_step(reader.step());
  // Random streams continue exactly only where the same ranks do the same work: the same layout.
  // Elsewhere each rank keeps its own generator (a new layout draws differently anyway).
  if (same_layout && static_cast<int>(reader.rng_cpu().size()) == groups.world().size()) {
    SetCpuRngState(reader.rng_cpu()[groups.rank()], absl::StrCat("checkpoint ", reader.dir(), ": manifest.json"));
  }
  groups.world().Barrier()->Wait();
  return reader.step();
}

}  // namespace checkpoint
}  // namespace zeropp
