#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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
