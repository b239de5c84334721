#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "util/byte_stage.hpp"
#include "util/error.hpp"

using namespace sb;

TEST_CASE("a byte stage consumes every byte in order, whatever the write sizes", "[byte_stage]") {
  std::string in;
  for (int i = 0; i < 300000; ++i) in += static_cast<char>('a' + (i * 7 + i / 13) % 26);
  for (size_t block : {size_t(1), size_t(1000), size_t(4096), size_t(1 << 20)}) {
    INFO("block " << block);
    std::string out;
    std::thread::id consumer;
    ByteStage stage(
        [&](const char* d, size_t n) {
          consumer = std::this_thread::get_id();
          out.append(d, n);
        },
        block, 2);
    for (size_t off = 0, step = 1; off < in.size(); off += step, step = step * 3 % 5000 + 1)
      stage.push(in.data() + off, std::min(step, in.size() - off));
    stage.finish();
    CHECK(out == in);
    CHECK(consumer != std::this_thread::get_id());  // it ran on the stage's thread
  }
}

TEST_CASE("a byte stage's bounded queue holds the producer back", "[byte_stage]") {
  std::atomic<int> consumed{0};
  ByteStage stage(
      [&](const char*, size_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++consumed;
      },
      10, 2);
  std::string block(10, 'x');
  for (int i = 0; i < 8; ++i) stage.push(block.data(), block.size());
  // 8 blocks pushed with room for 2 queued: the producer waited for at
  // least 4 of the consumer's 20 ms.
  CHECK(stage.blocked_seconds() > 0.05);
  stage.finish();
  CHECK(consumed == 8);
}

// Shared blocks may be far larger than the stage's block size (a gzip
// chunk's output, whole): the queue is bounded by bytes too, so a slow
// consumer cannot make it hold dozens of them.
TEST_CASE("a byte stage's queue is bounded by bytes as well as blocks", "[byte_stage]") {
  std::atomic<size_t> most{0};
  std::atomic<int> consumed{0};
  ByteStage stage(
      [&](const char*, size_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++consumed;
      },
      10, 64, 3000);
  auto big = std::make_shared<std::string>(1000, 'x');
  for (int i = 0; i < 20; ++i) {
    // The owner's use count less ours and `big`'s: the blocks queued or being consumed.
    most = std::max<size_t>(most, static_cast<size_t>(big.use_count()) - 1);
    stage.push_shared(big, big->data(), big->size());
  }
  // 20 blocks of 1000 bytes with room for 3000: at most 3 queued and one
  // being consumed, and the producer waited.
  CHECK(most <= 4);
  CHECK(stage.blocked_seconds() > 0.02);
  stage.finish();
  CHECK(consumed == 20);
  CHECK(big.use_count() == 1);
}

TEST_CASE("a byte stage's failure reaches the producer and stops it", "[byte_stage]") {
  int calls = 0;
  ByteStage stage(
      [&](const char*, size_t) {
        if (++calls == 3) throw Error("disk full");
      },
      4, 1);
  std::string block(4, 'x');
  bool thrown = false;
  try {
    for (int i = 0; i < 1000; ++i) stage.push(block.data(), block.size());
    stage.finish();
  } catch (const Error& e) {
    thrown = true;
    CHECK(std::string(e.what()) == "disk full");
  }
  CHECK(thrown);
  CHECK(calls == 3);  // nothing consumed after the failure
}

TEST_CASE("a byte stage dropped without finish stops its thread", "[byte_stage]") {
  std::atomic<int> consumed{0};
  {
    ByteStage stage([&](const char*, size_t) { ++consumed; }, 1, 64);
    stage.push("abcdef", 6);
  }  // an error unwinding the producer: no hang, no crash
  CHECK(consumed <= 6);
}

TEST_CASE("a byte stage keeps the order of copied and shared blocks, and lets go of shared ones", "[byte_stage]") {
  std::string out;
  auto shared = std::make_shared<std::string>("SHARED");
  {
    ByteStage stage([&](const char* d, size_t n) { out.append(d, n); }, 4, 2);
    stage.push("ab", 2);  // gathered, not yet a whole block
    stage.push_shared(shared, shared->data(), shared->size());
    stage.push("cdefg", 5);
    stage.push_shared(shared, shared->data() + 1, 2);
    stage.finish();
  }
  CHECK(out == "abSHAREDcdefgHA");
  CHECK(shared.use_count() == 1);
}
