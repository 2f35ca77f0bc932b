#include "dnnl_lstm.h"

#include <cstring>
#include <string>

namespace reel::bilstm {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// A weight (or weight gradient) the primitive wants in its own layout: either used in place from
// the caller's array, or copied through a cached reorder.
struct Slot {
  memory::desc user_md;
  bool reorder = false;
  memory mem;          // in the primitive's layout, when reorder
  dnnl::reorder prim;  // user -> primitive (weights) or primitive -> user (gradients)

  void Init(const dnnl::engine& eng, const memory::desc& user, const memory::desc& want,
            bool to_user) {
    user_md = user;
    reorder = !(user == want);
    if (!reorder) return;
    mem = memory(want, eng);
    prim = to_user ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, want, eng, user))
                   : dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, want));
  }
  // The weights as the primitive wants them.
  memory In(const dnnl::engine& eng, dnnl::stream& s, const float* user) {
    memory u(user_md, eng, const_cast<float*>(user));
    if (!reorder) return u;
    prim.execute(s, u, mem);
    return mem;
  }
  // Where the primitive writes a gradient; zeroed, since oneDNN's RNN backward accumulates them.
  memory Out(const dnnl::engine& eng, float* user) {
    memory m = reorder ? mem : memory(user_md, eng, user);
    std::memset(m.get_data_handle(), 0, m.get_desc().get_size());
    return m;
  }
  void Finish(const dnnl::engine& eng, dnnl::stream& s, float* user) {
    if (!reorder) return;
    memory u(user_md, eng, user);
    prim.execute(s, mem, u);
  }
};

}  // namespace

struct DnnlLstm::Plan {
  memory::desc src_md, dst_md, bias_md;
  // Explicit zero initial states: without them oneDNN 2.6's backward reads an uninitialised
  // state for t = -1 when computing the weights_iter gradient (caught by the gradient tests).
  memory zero_iter, diff_iter, diff_iter_c;
  // Each primitive gets its own scratchpad, so the two directions can run concurrently.
  memory fwd_scratch, bwd_scratch;
  dnnl::lstm_forward::primitive_desc fwd_pd;
  dnnl::lstm_forward fwd;
  Slot wx_fwd, wh_fwd;
  memory workspace;
  dnnl::lstm_backward::primitive_desc bwd_pd;
  dnnl::lstm_backward bwd;
  Slot wx_bwd, wh_bwd, dwx, dwh;
};

DnnlLstm::DnnlLstm(const dnnl::engine& engine, int64_t input, int64_t hidden)
    : engine_(engine), stream_(engine_), input_(input), hidden_(hidden) {}

DnnlLstm::~DnnlLstm() = default;

DnnlLstm::Plan* DnnlLstm::BuildPlan(int64_t steps, int64_t batch, bool train) {
  auto plan = std::make_unique<Plan>();
  const memory::dim t = steps, b = batch, i = input_, h = hidden_;
  plan->src_md = memory::desc({t, b, i}, Dt::f32, Tag::tnc);
  plan->dst_md = memory::desc({t, b, h}, Dt::f32, Tag::tnc);
  plan->bias_md = memory::desc({1, 1, 4, h}, Dt::f32, Tag::ldgo);
  const memory::desc wx_user({1, 1, i, 4, h}, Dt::f32, Tag::ldigo);
  const memory::desc wh_user({1, 1, h, 4, h}, Dt::f32, Tag::ldigo);
  const memory::desc wx_any({1, 1, i, 4, h}, Dt::f32, Tag::any);
  const memory::desc wh_any({1, 1, h, 4, h}, Dt::f32, Tag::any);
  const memory::desc none;
  const memory::desc iter_md({1, 1, b, h}, Dt::f32, Tag::ldnc);
  plan->zero_iter = memory(iter_md, engine_);
  std::memset(plan->zero_iter.get_data_handle(), 0, iter_md.get_size());
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  dnnl::lstm_forward::desc fwd_desc(
      train ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, dir,
      plan->src_md, iter_md, iter_md, wx_any, wh_any, plan->bias_md, plan->dst_md, none, none);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  plan->fwd_pd = dnnl::lstm_forward::primitive_desc(fwd_desc, attr, engine_);
  plan->fwd_scratch = memory(plan->fwd_pd.scratchpad_desc(), engine_);
  plan->fwd = dnnl::lstm_forward(plan->fwd_pd);
  plan->wx_fwd.Init(engine_, wx_user, plan->fwd_pd.weights_layer_desc(), false);
  plan->wh_fwd.Init(engine_, wh_user, plan->fwd_pd.weights_iter_desc(), false);
  if (train) {
    plan->workspace = memory(plan->fwd_pd.workspace_desc(), engine_);
    plan->diff_iter = memory(iter_md, engine_);
    plan->diff_iter_c = memory(iter_md, engine_);
    dnnl::lstm_backward::desc bwd_desc(dnnl::prop_kind::backward, dir, plan->src_md, iter_md,
                                       iter_md, wx_any, wh_any, plan->bias_md, plan->dst_md, none,
                                       none, plan->src_md, iter_md, iter_md, wx_any, wh_any,
                                       plan->bias_md, plan->dst_md, none, none);
    plan->bwd_pd = dnnl::lstm_backward::primitive_desc(bwd_desc, attr, engine_, plan->fwd_pd);
    plan->bwd_scratch = memory(plan->bwd_pd.scratchpad_desc(), engine_);
    plan->bwd = dnnl::lstm_backward(plan->bwd_pd);
    plan->wx_bwd.Init(engine_, wx_user, plan->bwd_pd.weights_layer_desc(), false);
    plan->wh_bwd.Init(engine_, wh_user, plan->bwd_pd.weights_iter_desc(), false);
    plan->dwx.Init(engine_, wx_user, plan->bwd_pd.diff_weights_layer_desc(), true);
    plan->dwh.Init(engine_, wh_user, plan->bwd_pd.diff_weights_iter_desc(), true);
  }
  Plan* raw = plan.get();
  plans_[{steps, batch, train}] = std::move(plan);
  return raw;
}

Result<DnnlLstm::Plan*> DnnlLstm::GetPlan(int64_t steps, int64_t batch, bool train) {
  auto it = plans_.find({steps, batch, train});
  if (it != plans_.end()) {
    ++stats_.hits;
    return it->second.get();
  }
  ++stats_.misses;
  try {
    return BuildPlan(steps, batch, train);
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN could not set up an LSTM for T=" + std::to_string(steps) +
                         ", B=" + std::to_string(batch) + ", I=" + std::to_string(input_) +
                         ", H=" + std::to_string(hidden_) + ": " + e.what());
  }
}

Status DnnlLstm::Forward(bool train, int64_t steps, int64_t batch, const float* src,
                         const float* wx, const float* wh, const float* bias, float* dst) {
  REEL_ASSIGN_OR_RETURN(Plan * p, GetPlan(steps, batch, train));
  try {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC_LAYER, memory(p->src_md, engine_, const_cast<float*>(src))},
        {DNNL_ARG_SRC_ITER, p->zero_iter},
        {DNNL_ARG_SRC_ITER_C, p->zero_iter},
        {DNNL_ARG_WEIGHTS_LAYER, p->wx_fwd.In(engine_, stream_, wx)},
        {DNNL_ARG_WEIGHTS_ITER, p->wh_fwd.In(engine_, stream_, wh)},
        {DNNL_ARG_BIAS, memory(p->bias_md, engine_, const_cast<float*>(bias))},
        {DNNL_ARG_DST_LAYER, memory(p->dst_md, engine_, dst)},
        {DNNL_ARG_SCRATCHPAD, p->fwd_scratch}};
    if (train) args.insert({DNNL_ARG_WORKSPACE, p->workspace});
    p->fwd.execute(stream_, args);
    stream_.wait();
  } catch (const dnnl::error& e) {
    return InternalError(std::string("oneDNN LSTM forward failed: ") + e.what());
  }
  return Status::Ok();
}

Status DnnlLstm::Backward(int64_t steps, int64_t batch, const float* src, const float* dst,
                          const float* wx, const float* wh, const float* bias, const float* ddst,
                          float* dsrc, float* dwx, float* dwh, float* dbias) {
  REEL_ASSIGN_OR_RETURN(Plan * p, GetPlan(steps, batch, true));
  try {
    memory db(p->bias_md, engine_, dbias);
    std::memset(dbias, 0, p->bias_md.get_size());
    memory dwx_mem = p->dwx.Out(engine_, dwx);
    memory dwh_mem = p->dwh.Out(engine_, dwh);
    p->bwd.execute(stream_,
                   {{DNNL_ARG_SRC_LAYER, memory(p->src_md, engine_, const_cast<float*>(src))},
                    {DNNL_ARG_SRC_ITER, p->zero_iter},
                    {DNNL_ARG_SRC_ITER_C, p->zero_iter},
                    {DNNL_ARG_DIFF_SRC_ITER, p->diff_iter},
                    {DNNL_ARG_DIFF_SRC_ITER_C, p->diff_iter_c},
                    {DNNL_ARG_WEIGHTS_LAYER, p->wx_bwd.In(engine_, stream_, wx)},
                    {DNNL_ARG_WEIGHTS_ITER, p->wh_bwd.In(engine_, stream_, wh)},
                    {DNNL_ARG_BIAS, memory(p->bias_md, engine_, const_cast<float*>(bias))},
                    {DNNL_ARG_DST_LAYER, memory(p->dst_md, engine_, const_cast<float*>(dst))},
                    {DNNL_ARG_DIFF_DST_LAYER, memory(p->dst_md, engine_, const_cast<float*>(ddst))},
                    {DNNL_ARG_WORKSPACE, p->workspace},
                    {DNNL_ARG_DIFF_SRC_LAYER, memory(p->src_md, engine_, dsrc)},
                    {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwx_mem},
                    {DNNL_ARG_DIFF_WEIGHTS_ITER, dwh_mem},
                    {DNNL_ARG_DIFF_BIAS, db},
                    {DNNL_ARG_SCRATCHPAD, p->bwd_scratch}});
    p->dwx.Finish(engine_, stream_, dwx);
    p->dwh.Finish(engine_, stream_, dwh);
    stream_.wait();
  } catch (const dnnl::error& e) {
    return InternalError(std::string("oneDNN LSTM backward failed: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace reel::bilstm
