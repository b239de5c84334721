// eStargz prefetch orders as documents (src/pipeline/prefetch_order.cpp): what
// `test --record-prefetch` writes reads back, and a document from a layout that
// is not an order of normalised image paths is refused, saying where and why.
#include <catch2/catch.hpp>

#include "pipeline/prefetch_order.hpp"
#include "util/error.hpp"

using namespace sb;

TEST_CASE("prefetch orders - written and read back as layer entry names, duplicates once", "[prefetch]") {
  const std::vector<std::string> paths{"usr/bin/python3", "usr/lib/libz.so.1", "opt/x y/ü"};
  CHECK(parse_prefetch_document(prefetch_document(paths), "doc") == paths);
  CHECK(parse_prefetch_document(R"({"paths": ["/a", "/b", "/a"]})", "doc") == std::vector<std::string>{"a", "b"});
  CHECK(parse_prefetch_document(R"({"paths": []})", "doc").empty());
}

TEST_CASE("prefetch orders - a document that is not an order of image paths is refused", "[prefetch]") {
  auto refused = [](const std::string& text, const std::string& why) {
    INFO(text);
    CHECK_THROWS_WITH(parse_prefetch_document(text, "the order X"), Catch::StartsWith("the order X: ") && Catch::Contains(why));
  };
  refused("not json", "not JSON");
  refused(R"(["/a"])", "wants an object with a list 'paths'");
  refused(R"({"paths": "/a"})", "wants an object with a list 'paths'");
  refused(R"({"paths": ["/a", 7]})", "paths[1] is not a string");
  refused(R"({"paths": ["a/b"]})", "'a/b' is not absolute");
  refused(R"({"paths": ["/"]})", "is the root");
  refused(R"({"paths": ["/data/../../etc/shadow"]})", "is not normalised");
  refused(R"({"paths": ["/a//b"]})", "is not normalised");
  refused(R"({"paths": ["/a/./b"]})", "is not normalised");
  refused(R"({"paths": ["/a/"]})", "is not normalised");
  refused(R"({"paths": ["/a\u0000b"]})", "holds a NUL byte");
  refused("{\"paths\": [\"/" + std::string(5000, 'x') + "\"]}", "is longer than 4096 bytes");
}
