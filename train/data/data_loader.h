// Batches over a Dataset: seeded shuffling, optional length bucketing for seq2seq, collation
// with padding, exact resume, and optional prefetch on one background thread.
//
// Reproducibility: the batches of epoch e are a pure function of (dataset size, options, seed,
// e) (plus the examples' lengths when bucketing). The permutation uses the loader's own
// splitmix64 generator and Fisher-Yates, not std::shuffle or std distributions, whose output
// differs between standard libraries. Prefetching changes nothing but timing.
//
// Bucketing (bucket_by_length): shuffle the examples; cut them into pools of
// batch_size * bucket_size_multiplier; sort each pool by (src length, tgt length), stably, so
// ties keep the shuffled order; cut pools into batches; then shuffle the order of the batches.
// Only the last pool can leave a partial batch; drop_last drops it. Without `shuffle` the
// same steps run on the dataset order with no shuffling.
//
// Threading: with prefetch > 0, Dataset::get is called from the loader's background thread
// while the epoch runs, so the dataset must not be modified meanwhile. An exception thrown
// while preparing a batch is rethrown by the next() that would have returned it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "train/data/augment.h"
#include "train/data/dataset.h"

namespace mixlab {

struct DataLoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // drop the final partial batch
  int32_t pad_id = 0;
  bool bucket_by_length = false;
  int64_t bucket_size_multiplier = 100;  // batches per sort pool when bucketing
  int64_t prefetch = 0;                  // batches prepared ahead by one thread; 0 = synchronous
  // [distributed] Data parallelism (train/distributed/distributed.h): batch_size is then the global
  // batch; the epoch is planned as above and this process gets slice shard_index of shard_count of
  // every batch (contiguous, sizes differing by at most one; empty when a batch is smaller than
  // shard_count). Positions and batches_per_epoch() count global batches.
  int64_t shard_index = 0, shard_count = 1;
  // Training images only (train/data/augment.h): drawn from (seed, epoch, dataset index), so the
  // batches stay a pure function of the same inputs as above.
  ImageAugmentation augment;
};

// [distributed] Slice `index` of `count` of a batch: elements [index*m/count, (index+1)*m/count).
std::vector<size_t> shard_of_batch(const std::vector<size_t>& batch, int64_t index, int64_t count);

// Collates dataset[indices] into a batch: src/tgt right-padded with pad_id to the longest in the
// batch with their lengths; features concatenated, feature_shape = [B, F] (left empty when the
// examples have no features; all examples must have the same F); labels; indices.
Batch collate(const Dataset& dataset, const std::vector<size_t>& indices, int32_t pad_id);

// The batches (lists of dataset indices) of one epoch, in order. `lengths` holds (src, tgt)
// lengths per example and is needed only when bucketing.
std::vector<std::vector<size_t>> plan_epoch(
    size_t dataset_size, const DataLoaderOptions& options, int64_t epoch,
    const std::vector<std::pair<int32_t, int32_t>>& lengths);

class DataLoader {
 public:
  // Keeps a reference to `dataset`, which must outlive the loader. Reads every example's lengths
  // once when bucketing.
  DataLoader(const Dataset& dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` (>= 0), skipping its first `skip_batches` batches: restoring a saved
  // (epoch, position()) pair continues with exactly the batches that were not handed out yet.
  // Stops any prefetching of the previous epoch first.
  void start_epoch(int64_t epoch) { start_epoch(epoch, 0); }
  void start_epoch(int64_t epoch, int64_t skip_batches);

  // The next batch of the epoch into `out` (overwritten); false at the end of the epoch.
  // Throws Error before the first start_epoch.
  bool next(Batch& out);

  int64_t batches_per_epoch() const;
  int64_t position() const { return position_; }  // batches handed out this epoch (incl. skipped)
  int64_t epoch() const { return epoch_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  void stop_worker();
  void worker_loop();
  void prepare(size_t batch_index, Batch& out) const;  // collate, then augment

  const Dataset& dataset_;
  DataLoaderOptions options_;
  std::vector<std::pair<int32_t, int32_t>> lengths_;  // only when bucketing
  std::vector<std::vector<size_t>> plan_;
  int64_t epoch_ = -1;
  int64_t planned_epoch_ = -1;  // the epoch plan_ belongs to, set before the worker starts
  int64_t position_ = 0;

  // Prefetch state: the worker fills `queue_` with the batches from `produced_` on.
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t produced_ = 0;
};

}  // namespace mixlab
