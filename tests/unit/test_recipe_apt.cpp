// The apt keys of a recipe (repositories:, pins:, recommends:, base:,
// priority:): what they parse to, how extends merges them, and every mistake
// at its file:line:col.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "recipe/recipe.hpp"

using namespace sb;

TEST_CASE("recipe apt keys: repositories pins and layer options parse", "[recipe][apt]") {
  TempDir tmp;
  test::write(tmp.path() / "keys/vendor.gpg", "k");
  test::write(tmp.path() / "recipe.yaml",
              "stack: t\n"
              "repositories:\n"
              "  - default\n"
              "  - {url: \"http://127.0.0.1:8080/vendor/\", suites: [stable, stable-updates], components: [main, extra],\n"
              "     keyring: keys/vendor.gpg, priority: 990}\n"
              "pins:\n"
              "  - {origin: Vendor, priority: 100}\n"
              "layers:\n"
              "  - {name: os, use: debian, version: trixie, priority: important}\n"
              "  - name: tools\n"
              "    apt: [git]\n"
              "    recommends: true\n"
              "    base: true\n"
              "    repositories: [{url: \"file:///srv/repo\", trusted: true, check_valid_until: false}]\n"
              "    pins: [{origin: Local, priority: 1001}]\n"
              "  - name: cuda\n"
              "    apt: [nvidia-cuda-toolkit]\n"
              "    repositories: [{default: true, components: [main, contrib, non-free]}]\n"
              "  - {name: dl, use: nccl, from: apt, repositories: [default], recommends: true}\n");
  Recipe r = load_recipe(tmp.path() / "recipe.yaml");
  REQUIRE(r.repositories.size() == 2);
  CHECK(r.repositories[0].is_default);
  const AptRepositorySpec& v = r.repositories[1];
  CHECK(v.url == "http://127.0.0.1:8080/vendor");  // no trailing '/'
  CHECK(v.suites == std::vector<std::string>{"stable", "stable-updates"});
  CHECK(v.components == std::vector<std::string>{"main", "extra"});
  CHECK(v.keyring_file == tmp.path() / "keys/vendor.gpg");
  CHECK(v.priority == 990);
  CHECK(v.where.line == 4);
  REQUIRE(r.pins.size() == 1);
  CHECK(r.pins[0].origin == "Vendor");
  CHECK(r.layers[0].priority == "important");
  CHECK_FALSE(r.layers[0].recommends);
  const LayerSpec& t = r.layers[1];
  CHECK(t.recommends);
  CHECK(t.base);
  REQUIRE(t.repositories.size() == 1);
  CHECK(t.repositories[0].trusted);
  CHECK_FALSE(t.repositories[0].check_valid_until);
  CHECK(t.repositories[0].components == std::vector<std::string>{"main"});  // the default
  CHECK(t.repositories[0].suites.empty());                                  // the layer's release
  CHECK(t.pins[0].priority == 1001);
  // The defaults with other components: still the defaults, the components replaced.
  const AptRepositorySpec& d = r.layers[2].repositories.at(0);
  CHECK(d.is_default);
  CHECK(d.components == std::vector<std::string>{"main", "contrib", "non-free"});
  CHECK(r.repositories[0].components.empty());  // the word: the defaults' own components
  CHECK(r.layers[3].recommends);                 // a from: apt layer takes the apt keys too
  nlohmann::json j = r;
  CHECK(j["repositories"][0] == "default");
  CHECK(j["layers"][2]["repositories"][0] ==
        nlohmann::json{{"default", true}, {"components", {"main", "contrib", "non-free"}}});
  CHECK(j["layers"][1]["recommends"] == true);
  // A child recipe replaces what it gives.
  test::write(tmp.path() / "child.yaml",
              "extends: recipe.yaml\nrepositories: [default]\nlayers:\n  - {name: tools, recommends: false}\n");
  Recipe c = load_recipe(tmp.path() / "child.yaml");
  CHECK(c.repositories.size() == 1);
  CHECK_FALSE(c.layers[1].recommends);
  CHECK(c.layers[1].base);
  CHECK(c.layers[1].repositories.size() == 1);
}

TEST_CASE("recipe apt keys: every mistake names its place", "[recipe][apt][errors]") {
  TempDir tmp;
  struct Case {
    const char* name;
    std::string yaml;
    int line, column;
    const char* message;
  };
  const std::string head = "stack: t\n";
  const std::string layer = "layers:\n  - {name: a, apt: [git]}\n";
  const Case cases[] = {
      {"a repository word", head + "repositories: [defualt]\n" + layer, 2, 16, "or the word 'default', not 'defualt'"},
      {"a repository without url", head + "repositories: [{suites: [x]}]\n" + layer, 2, 16, "missing key 'url'"},
      {"a bad url", head + "repositories: [{url: \"ftp://x/y\"}]\n" + layer, 2, 22,
       "must be an http://, https:// or file:/// URL"},
      {"an unknown repository key", head + "repositories: [{url: \"http://x/y\", suite: a}]\n" + layer, 2, 36,
       "unknown key 'suite' in a repository (did you mean 'suites'?)"},
      {"a flat repository", head + "repositories: [{url: \"http://x/y\", suites: [./]}]\n" + layer, 2, 44,
       "flat repositories"},
      {"trusted and a keyring", head + "repositories: [{url: \"http://x/y\", keyring: k.gpg, trusted: true}]\n" + layer,
       2, 61, "either checked against a keyring or trusted"},
      {"a missing keyring", head + "repositories: [{url: \"http://x/y\", keyring: none.gpg}]\n" + layer, 2, 16,
       "keyring 'none.gpg' not found"},
      {"default twice", head + "repositories: [default, default]\n" + layer, 2, 25, "'default' is listed twice"},
      {"default false", head + "repositories: [{default: false, components: [main]}]\n" + layer, 2, 26,
       "'default: false' names no repository"},
      {"default with a url", head + "repositories: [{default: true, url: \"http://x/y\"}]\n" + layer, 2, 32,
       "unknown key 'url' in a default repository"},
      {"default without components", head + "repositories: [{default: true}]\n" + layer, 2, 16,
       "missing key 'components'"},
      {"default with a bad component", head + "repositories: [{default: true, components: [\"non free\"]}]\n" + layer,
       2, 44, "holds words such as trixie or main"},
      {"an empty list", head + "repositories: []\n" + layer, 2, 15, "'repositories' is an empty list"},
      {"a pin without priority", head + "pins: [{origin: X}]\n" + layer, 2, 8, "missing key 'priority'"},
      {"a pin twice", head + "pins: [{origin: X, priority: 1}, {origin: X, priority: 2}]\n" + layer, 2, 43,
       "origin 'X' is pinned twice"},
      {"a priority typo", head + "layers:\n  - {name: a, apt: [git], priority: requird}\n", 3, 37,
       "not 'requird' (did you mean 'required'?)"},
      {"recommends not a boolean", head + "layers:\n  - {name: a, apt: [git], recommends: maybe}\n", 3, 39,
       "'recommends'"},
      {"apt keys on a copy layer", head + "layers:\n  - {name: a, copy: [{src: f, dst: /f}], recommends: true}\n", 3,
       42, "'recommends' applies to apt layers"},
      {"apt keys on a pip layer", head + "layers:\n  - {name: a, pip: [numpy], base: true}\n", 3, 29,
       "'base' applies to apt layers"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      test::write(tmp.path() / "recipe.yaml", c.yaml);
      std::optional<InputError> e;
      try {
        load_recipe(tmp.path() / "recipe.yaml");
      } catch (const InputError& x) {
        e = x;
      }
      REQUIRE(e);
      INFO(e->render());
      CHECK(e->location().line == c.line);
      CHECK(e->location().column == c.column);
      CHECK_THAT(e->message(), Catch::Contains(c.message));
    }
  }
}
