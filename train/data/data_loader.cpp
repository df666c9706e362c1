#include "train/data/data_loader.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <system_error>

#include "core/error.h"
#include "train/data/batch_mixing.h"
#include "train/data/rng.h"

namespace mixlab {

namespace {

// The epoch's generator: seed and epoch are both mixed, so neighbouring seeds or epochs give
// unrelated streams (plain seed + epoch would just shift one stream).
SplitMix64 epoch_generator(uint64_t seed, int64_t epoch) {
  SplitMix64 mixer(seed);
  const uint64_t a = mixer.next();
  SplitMix64 epoch_mixer(a ^ static_cast<uint64_t>(epoch));
  return SplitMix64(epoch_mixer.next());
}

// Consecutive runs of `batch_size` from order[begin, end) appended to `batches`.
void cut_batches(const std::vector<size_t>& order, size_t begin, size_t end, size_t batch_size,
                 std::vector<std::vector<size_t>>& batches) {
  for (size_t start = begin; start < end; start += batch_size) {
    const size_t stop = std::min(end, start + batch_size);
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(stop));
  }
}

int32_t checked_length(size_t length, size_t index, const char* field) {
  check(length <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "collate: example ",
        index, " has a ", field, " of ", length, " tokens, beyond int32");
  return static_cast<int32_t>(length);
}

void collate_into(const Dataset& dataset, const std::vector<size_t>& indices, int32_t pad_id,
                  Batch& out) {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (const size_t index : indices) examples.push_back(dataset.get(index));

  const size_t batch = examples.size();
  size_t src_len = 0, tgt_len = 0;
  for (const Example& example : examples) {
    src_len = std::max(src_len, example.src.size());
    tgt_len = std::max(tgt_len, example.tgt.size());
  }
  const size_t features = batch > 0 ? examples[0].features.size() : 0;

  out.size = static_cast<int64_t>(batch);
  out.src_len = static_cast<int64_t>(src_len);
  out.tgt_len = static_cast<int64_t>(tgt_len);
  out.src.assign(batch * src_len, pad_id);
  out.tgt.assign(batch * tgt_len, pad_id);
  out.src_lengths.resize(batch);
  out.tgt_lengths.resize(batch);
  out.features.clear();
  out.features.reserve(batch * features);
  out.feature_shape.clear();
  if (features > 0)
    out.feature_shape = {static_cast<int64_t>(batch), static_cast<int64_t>(features)};
  out.labels.resize(batch);
  out.indices = indices;

  for (size_t b = 0; b < batch; ++b) {
    const Example& example = examples[b];
    check(example.features.size() == features, "collate: example ", indices[b], " has ",
          example.features.size(), " features but example ", indices[0], " has ", features);
    std::copy(example.src.begin(), example.src.end(), out.src.begin() + b * src_len);
    std::copy(example.tgt.begin(), example.tgt.end(), out.tgt.begin() + b * tgt_len);
    out.src_lengths[b] = checked_length(example.src.size(), indices[b], "src");
    out.tgt_lengths[b] = checked_length(example.tgt.size(), indices[b], "tgt");
    out.features.insert(out.features.end(), example.features.begin(), example.features.end());
    out.labels[b] = example.label;
  }
}

void check_options(const DataLoaderOptions& options) {
  check(options.batch_size >= 1, "DataLoader: batch_size must be at least 1, got ",
        options.batch_size);
  check(options.bucket_size_multiplier >= 1,
        "DataLoader: bucket_size_multiplier must be at least 1, got ",
        options.bucket_size_multiplier);
  check(options.prefetch >= 0, "DataLoader: prefetch must be 0 or more, got ", options.prefetch);
  check_augmentation(options.augment,
                     options.augment.channels * options.augment.height * options.augment.width);
}

}  // namespace

Batch collate(const Dataset& dataset, const std::vector<size_t>& indices, int32_t pad_id) {
  Batch batch;
  collate_into(dataset, indices, pad_id, batch);
  return batch;
}

std::vector<std::vector<size_t>> plan_epoch(
    size_t dataset_size, const DataLoaderOptions& options, int64_t epoch,
    const std::vector<std::pair<int32_t, int32_t>>& lengths) {
  check_options(options);
  check(epoch >= 0, "DataLoader: epoch must be 0 or more, got ", epoch);
  const size_t batch_size = static_cast<size_t>(options.batch_size);

  std::vector<size_t> order(dataset_size);
  std::iota(order.begin(), order.end(), size_t{0});
  SplitMix64 rng = epoch_generator(options.seed, epoch);
  if (options.shuffle) rng.shuffle(order);

  std::vector<std::vector<size_t>> batches;
  if (options.bucket_by_length) {
    check(lengths.size() == dataset_size, "DataLoader: ", lengths.size(),
          " lengths for a dataset of ", dataset_size, " (did the dataset change size?)");
    const uint64_t multiplier = static_cast<uint64_t>(options.bucket_size_multiplier);
    const size_t pool = multiplier > std::numeric_limits<size_t>::max() / batch_size
                            ? dataset_size
                            : static_cast<size_t>(multiplier) * batch_size;
    for (size_t begin = 0; begin < dataset_size; begin += std::min(pool, dataset_size - begin)) {
      const size_t end = begin + std::min(pool, dataset_size - begin);
      // Stable, so equal lengths keep the shuffled order.
      std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(begin),
                       order.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
      cut_batches(order, begin, end, batch_size, batches);
    }
  } else {
    cut_batches(order, 0, dataset_size, batch_size, batches);
  }
  // Only the very last batch can be partial (every bucketing pool but the last is a multiple of
  // the batch size), and it is dropped before the batch order is shuffled.
  if (options.drop_last && !batches.empty() && batches.back().size() < batch_size) {
    batches.pop_back();
  }
  if (options.bucket_by_length && options.shuffle) rng.shuffle(batches);
  return batches;
}

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : dataset_(dataset), options_(options) {
  check_options(options_);
  if (options_.bucket_by_length) {
    lengths_.reserve(dataset_.size());
    for (size_t i = 0; i < dataset_.size(); ++i) {
      const Example example = dataset_.get(i);
      lengths_.emplace_back(checked_length(example.src.size(), i, "src"),
                            checked_length(example.tgt.size(), i, "tgt"));
    }
  }
}

DataLoader::~DataLoader() { stop_worker(); }

std::vector<size_t> shard_of_batch(const std::vector<size_t>& batch, int64_t index, int64_t count) {
  check(count > 0 && index >= 0 && index < count, "shard_of_batch: shard ", index, " of ", count);
  const int64_t m = static_cast<int64_t>(batch.size());
  return std::vector<size_t>(batch.begin() + index * m / count,
                             batch.begin() + (index + 1) * m / count);
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = static_cast<int64_t>(dataset_.size());
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  stop_worker();
  epoch_ = -1;  // until the new epoch is fully set up, next() refuses to run
  std::vector<std::vector<size_t>> plan = plan_epoch(dataset_.size(), options_, epoch, lengths_);
  check(skip_batches >= 0 && skip_batches <= static_cast<int64_t>(plan.size()),
        "DataLoader::start_epoch: cannot skip ", skip_batches, " batches of an epoch of ",
        plan.size());
  if (options_.shard_count > 1)  // [distributed] this process's slice of every global batch
    for (auto& batch : plan)
      batch = shard_of_batch(batch, options_.shard_index, options_.shard_count);
  plan_ = std::move(plan);
  planned_epoch_ = epoch;
  position_ = skip_batches;
  if (options_.prefetch > 0) {
    produced_ = skip_batches;
    try {
      worker_ = std::thread(&DataLoader::worker_loop, this);
    } catch (const std::system_error& e) {
      fail("data loader: the system refused its prefetch thread (", e.what(),
           "); ask for fewer threads with --threads or MIXLAB_NUM_THREADS");
    }
  }
  epoch_ = epoch;
}

bool DataLoader::next(Batch& out) {
  check(epoch_ >= 0, "DataLoader::next: call start_epoch first");
  if (position_ >= static_cast<int64_t>(plan_.size())) return false;
  if (options_.prefetch == 0) {
    // On an exception the position stays, so a retry fails (or succeeds) on the same batch.
    prepare(static_cast<size_t>(position_), out);
    ++position_;
    return true;
  }
  std::unique_lock lock(mutex_);
  // The worker produces every batch from position_ on until it fails, so this cannot hang.
  changed_.wait(lock, [&] { return !queue_.empty(); });
  if (queue_.front().error) {
    // Left in the queue: the worker has stopped, and every retry reports the same failure.
    std::rethrow_exception(queue_.front().error);
  }
  out = std::move(queue_.front().batch);
  queue_.pop_front();
  lock.unlock();
  changed_.notify_all();
  ++position_;
  return true;
}

void DataLoader::worker_loop() {
  const int64_t total = static_cast<int64_t>(plan_.size());
  while (true) {
    int64_t index;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        return stopping_ || static_cast<int64_t>(queue_.size()) < options_.prefetch;
      });
      if (stopping_ || produced_ >= total) return;
      index = produced_;
    }
    Item item;
    try {
      prepare(static_cast<size_t>(index), item.batch);
    } catch (...) {
      item.error = std::current_exception();
    }
    const bool failed = item.error != nullptr;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      queue_.push_back(std::move(item));
      ++produced_;
    }
    changed_.notify_all();
    if (failed) return;
  }
}

void DataLoader::prepare(size_t batch_index, Batch& out) const {
  collate_into(dataset_, plan_[batch_index], options_.pad_id, out);
  augment_batch(out.features, out.indices, options_.augment, options_.seed, planned_epoch_);
  mix_batch(out, options_.augment, options_.seed, planned_epoch_);
}

void DataLoader::stop_worker() {
  if (worker_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
  queue_.clear();
  stopping_ = false;
}

}  // namespace mixlab
