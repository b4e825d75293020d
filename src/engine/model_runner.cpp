// The real ModelRunner: Model::Forward with last-row logits.
#include "engine/model_runner.h"

#include "base/thread_pool.h"

namespace mx {

Result<ForwardOutput> ModelRunner::ForwardRows(const ForwardBatch&, KvStore&) {
  return Unimplemented("this model runner has no speculative forward");
}

Result<MtpOutput> ModelRunner::ForwardMtp(const MtpBatch&, KvStore&) {
  return Unimplemented("this model runner has no MTP layer");
}

namespace {

class RealModelRunner final : public ModelRunner {
 public:
  RealModelRunner(std::unique_ptr<Model> model, const KernelTable& kt, int threads, MoeTuning moe)
      : model_(std::move(model)), kt_(kt), pool_(threads), moe_(std::move(moe)) {}

  const ModelConfig& config() const override { return model_->config(); }

  Result<std::vector<float>> Forward(const ForwardBatch& batch, KvStore& kv) override {
    ForwardOptions opts;
    opts.logits = LogitsMode::kLast;
    opts.prune_last_layer = true;  // only the logits are read
    opts.moe = moe_.For(batch);
    MX_ASSIGN_OR_RETURN(ForwardOutput out, model_->Forward(batch, opts, kv, kt_, pool_));
    return std::move(out.logits);
  }

  Result<ForwardOutput> ForwardRows(const ForwardBatch& batch, KvStore& kv) override {
    ForwardOptions opts;
    opts.logits = LogitsMode::kLast;
    opts.moe = moe_.For(batch);
    return model_->Forward(batch, opts, kv, kt_, pool_);
  }

  Result<MtpOutput> ForwardMtp(const MtpBatch& batch, KvStore& kv) override {
    return model_->ForwardMtp(batch, kv, kt_, pool_, moe_.For(batch));
  }

  const MoeTuning* moe_tuning() const override { return &moe_; }
  int threads() const override { return pool_.size(); }

 private:
  std::unique_ptr<Model> model_;
  const KernelTable& kt_;
  ThreadPool pool_;
  MoeTuning moe_;
};

}  // namespace

std::unique_ptr<ModelRunner> MakeModelRunner(std::unique_ptr<Model> model, const KernelTable& kt,
                                             int threads, MoeTuning moe) {
  return std::make_unique<RealModelRunner>(std::move(model), kt, threads, std::move(moe));
}

}  // namespace mx
