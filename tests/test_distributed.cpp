// Data parallelism (train/distributed/distributed.h) in one process: the shards of a batch, the
// loader's per-rank view, the loss-term counts, the per-rank dropout seeds, and the single-process
// pass-through. The multi-process checks run under mpirun: tests/distributed/distributed_check.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/random.h"
#include "nn/layers.h"
#include "train/data/data_loader.h"
#include "train/distributed/distributed.h"

using namespace mixlab;

namespace {

InMemoryDataset numbered(size_t n) {
  std::vector<Example> examples(n);
  for (size_t i = 0; i < n; ++i) {
    examples[i].src.assign(1 + i % 7, static_cast<int32_t>(i + 3));
    examples[i].tgt.assign(2 + i % 5, static_cast<int32_t>(i + 3));
    examples[i].label = static_cast<int32_t>(i % 3);
  }
  return InMemoryDataset(std::move(examples));
}

}  // namespace

TEST_CASE("distributed: the shards of a batch are contiguous, balanced and cover it in order") {
  for (size_t m : {0u, 1u, 2u, 5u, 16u, 17u}) {
    std::vector<size_t> batch(m);
    for (size_t i = 0; i < m; ++i) batch[i] = 100 + i * 3;
    for (int64_t count : {1, 2, 3, 4}) {
      std::vector<size_t> joined;
      size_t smallest = m, largest = 0;
      for (int64_t r = 0; r < count; ++r) {
        auto part = shard_of_batch(batch, r, count);
        joined.insert(joined.end(), part.begin(), part.end());
        smallest = std::min(smallest, part.size());
        largest = std::max(largest, part.size());
      }
      CHECK(joined == batch);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK_THROWS(shard_of_batch({1, 2}, 2, 2));
}

TEST_CASE("distributed: N sharded loaders together hand out the batches of one loader") {
  InMemoryDataset data = numbered(53);
  for (bool bucket : {false, true}) {
    DataLoaderOptions global;
    global.batch_size = 12;
    global.seed = 7;
    global.bucket_by_length = bucket;
    global.bucket_size_multiplier = 2;
    DataLoader whole(data, global);
    std::vector<std::vector<size_t>> expected;
    whole.start_epoch(3);
    for (Batch b; whole.next(b);) expected.push_back(b.indices);

    std::vector<std::vector<size_t>> joined(expected.size());
    for (int64_t r = 0; r < 3; ++r) {
      DataLoaderOptions mine = global;
      mine.shard_index = r;
      mine.shard_count = 3;
      mine.prefetch = r == 1 ? 2 : 0;  // prefetching changes nothing
      DataLoader loader(data, mine);
      CHECK(loader.batches_per_epoch() == whole.batches_per_epoch());
      loader.start_epoch(3);
      size_t k = 0;
      for (Batch b; loader.next(b); ++k) {
        REQUIRE(k < joined.size());
        CHECK(b.size == static_cast<int64_t>(b.indices.size()));
        joined[k].insert(joined[k].end(), b.indices.begin(), b.indices.end());
      }
      CHECK(k == expected.size());
    }
    CHECK(joined == expected);
  }
}

TEST_CASE("distributed: loss terms are target tokens for translation, examples otherwise") {
  InMemoryDataset data = numbered(4);
  Batch b = collate(data, {0, 1, 2, 3}, 0);  // tgt lengths 2, 3, 4, 5
  CHECK(loss_terms(b) == 1 + 2 + 3 + 4);
  Batch c = b;
  c.tgt.clear();
  c.tgt_len = 0;
  c.tgt_lengths.assign(4, 0);
  CHECK(loss_terms(c) == 4);
  c.labels[1] = -100;  // an ignored label is not a term
  CHECK(loss_terms(c) == 3);
}

TEST_CASE("distributed: rank 0 keeps the run's dropout seed, other ranks get distinct ones") {
  std::set<uint64_t> seeds;
  for (int r = 0; r < 64; ++r) seeds.insert(rank_stream_seed(42, r));
  CHECK(seeds.size() == 64);
  CHECK(rank_stream_seed(42, 0) == 42);
  CHECK(rank_stream_seed(42, 1) != rank_stream_seed(43, 1));
}

TEST_CASE("distributed: one process exchanges nothing and changes nothing") {
  REQUIRE(launch_info().size == 1);  // ctest does not run the suite under a launcher
  Communicator& world = world_communicator(Device::cpu());
  CHECK(world.size() == 1);
  CHECK(world.rank() == 0);
  CHECK(world.first_failed_rank(false) == -1);
  CHECK(world.first_failed_rank(true) == 0);
  CHECK(world.all_gather({1.5, 2.5}) == std::vector<double>{1.5, 2.5});
  CHECK(is_primary_process());

  Generator gen(1);
  Linear model(3, 2, true, gen);
  DataParallel dp(model);
  CHECK_FALSE(dp.active());
  InMemoryDataset data = numbered(3);
  Batch b = collate(data, {0, 1, 2}, 0);
  DataParallel::Share s = dp.share(1.25, b, 17, 1);
  CHECK(s.loss == 1.25);
  CHECK(s.weight == 1.0);
  CHECK(s.examples == 3);
  CHECK(s.tokens == 17);
  TrainingState state;
  std::vector<float> before = model.parameters()[0].to_float_vector();
  dp.start(model, state);
  CHECK(state.extra.count("world_size") == 0);  // single-process checkpoints are unchanged
  CHECK(model.parameters()[0].to_float_vector() == before);
  TrainingState saved;
  saved.extra = {{"world_size", "2"}};
  CHECK_THROWS_WITH(dp.check_resume(saved, "x/last.safetensors"),
                    doctest::Contains("written by a run of 2 data-parallel processes"));
  saved.extra.clear();
  CHECK_NOTHROW(dp.check_resume(saved, "x/last.safetensors"));
}
