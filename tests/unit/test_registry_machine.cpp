// The machine's registry settings (registries.conf, certs.d, auth files) read
// as containers/image reads them; tests/integration/test_registry_machine.sh
// checks the same files against skopeo and a real registry.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "registry/auth.hpp"
#include "registry/machine.hpp"
#include "util/error.hpp"

using namespace sb;
using namespace sb::registry;

namespace {

RegistriesConf conf_of(const std::string& text) {
  RegistriesConf c;
  c.add(text, "test.conf", false);
  return c;
}

std::vector<std::string> sources(const RegistriesConf& c, const std::string& ref) {
  std::vector<std::string> out;
  for (const auto& s : c.pull_sources(Reference::parse(ref)))
    out.push_back(s.ref.str() + (s.mirror ? " mirror" : "") + (s.insecure ? " insecure" : ""));
  return out;
}

}  // namespace

TEST_CASE("registries.conf: mirrors, then the primary location, with the name rewritten", "[registry][machine]") {
  auto c = conf_of(R"(
unqualified-search-registries = ["example.com"]

[[registry]]
prefix = "example.com/foo"
location = "internal.example.net/bar"

[[registry.mirror]]
location = "mirror-0.local/mirror-for-foo"

[[registry.mirror]]
location = "mirror-1.local:5000/mirrors/foo/"
insecure = true

[[registry]]
location = "registry.com"

[[registry.mirror]]
location = "mirror.registry.com"
)");
  CHECK(c.unqualified_search == std::vector<std::string>{"example.com"});
  CHECK(sources(c, "example.com/foo/image:latest") ==
        std::vector<std::string>{"mirror-0.local/mirror-for-foo/image:latest mirror",
                                 "mirror-1.local:5000/mirrors/foo/image:latest mirror insecure",
                                 "internal.example.net/bar/image:latest"});
  // A mirror belongs to its own table only.
  CHECK(sources(c, "registry.com/image:1") ==
        std::vector<std::string>{"mirror.registry.com/image:1 mirror", "registry.com/image:1"});
  // A prefix matches whole components: example.com/foobar is not example.com/foo.
  CHECK(sources(c, "example.com/foobar:1") == std::vector<std::string>{"example.com/foobar:1"});
  CHECK(sources(c, "other.io/x:1") == std::vector<std::string>{"other.io/x:1"});
  // A digest is kept through the rewrite.
  std::string d = "sha256:" + std::string(64, 'b');
  CHECK(sources(c, "example.com/foo/image@" + d).back() == "internal.example.net/bar/image@" + d);
}

TEST_CASE("registries.conf: the longest prefix wins - docker.io names are docker.io/library/...", "[registry][machine]") {
  auto c = conf_of(R"(
[[registry]]
prefix = "docker.io"
location = "hub-cache.local"

[[registry]]
prefix = "docker.io/library/debian"
location = "debian-cache.local/debian"
insecure = true

[[registry]]
prefix = "*.corp.example"
blocked = true

[[registry]]
prefix = "*.lab.example"
[[registry.mirror]]
location = "lab-mirror.local"
)");
  CHECK(sources(c, "debian:12") == std::vector<std::string>{"debian-cache.local/debian:12 insecure"});
  CHECK(sources(c, "docker.io/library/debian:12") == std::vector<std::string>{"debian-cache.local/debian:12 insecure"});
  CHECK(sources(c, "nvidia/cuda:12.6.0-base") == std::vector<std::string>{"hub-cache.local/nvidia/cuda:12.6.0-base"});
  REQUIRE(c.find(Reference::parse("alpine")));
  CHECK(c.find(Reference::parse("alpine"))->prefix == "docker.io");
  // *.DOMAIN: any depth of subdomain, not the domain itself; without a location the name stays.
  CHECK_THROWS_WITH(c.pull_sources(Reference::parse("a.b.corp.example/x:1")),
                    Catch::Contains("a.b.corp.example/x is blocked by the registry table with prefix '*.corp.example' in test.conf"));
  CHECK_THROWS_WITH(c.push_insecure(Reference::parse("git.corp.example/x:1")), Catch::Contains("is blocked"));
  CHECK(sources(c, "corp.example/x:1") == std::vector<std::string>{"corp.example/x:1"});
  CHECK(sources(c, "gpu.lab.example/team/x:1") ==
        std::vector<std::string>{"lab-mirror.local/team/x:1 mirror", "gpu.lab.example/team/x:1"});
  CHECK(c.push_insecure(Reference::parse("debian:12")));
  CHECK_FALSE(c.push_insecure(Reference::parse("nvidia/cuda:12")));
}

TEST_CASE("registries.conf: mirrors by digest only, or by tag only", "[registry][machine]") {
  std::string d = "@sha256:" + std::string(64, 'c');
  auto c = conf_of(R"(
[[registry]]
location = "a.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "a-mirror.io"

[[registry]]
location = "b.io"
[[registry.mirror]]
location = "digests.b-mirror.io"
pull-from-mirror = "digest-only"
[[registry.mirror]]
location = "tags.b-mirror.io"
pull-from-mirror = "tag-only"
[[registry.mirror]]
location = "all.b-mirror.io"
pull-from-mirror = "all"
)");
  CHECK(sources(c, "a.io/x:1") == std::vector<std::string>{"a.io/x:1"});
  CHECK(sources(c, "a.io/x" + d) == std::vector<std::string>{"a-mirror.io/x" + d + " mirror", "a.io/x" + d});
  CHECK(sources(c, "b.io/x:1") ==
        std::vector<std::string>{"tags.b-mirror.io/x:1 mirror", "all.b-mirror.io/x:1 mirror", "b.io/x:1"});
  CHECK(sources(c, "b.io/x" + d) == std::vector<std::string>{"digests.b-mirror.io/x" + d + " mirror",
                                                            "all.b-mirror.io/x" + d + " mirror", "b.io/x" + d});
}

TEST_CASE("registries.conf: the version 1 format, and drop-ins replacing tables by prefix", "[registry][machine]") {
  auto c = conf_of(R"(
[registries.search]
registries = ['registry1.com', 'registry2.com']
[registries.insecure]
registries = ['registry3.com']
[registries.block]
registries = ['registry.untrusted.com', 'registry3.com']
)");
  CHECK(c.unqualified_search == std::vector<std::string>{"registry1.com", "registry2.com"});
  CHECK_THROWS_WITH(c.pull_sources(Reference::parse("registry.untrusted.com/x")), Catch::Contains("is blocked"));
  CHECK_THROWS_WITH(c.pull_sources(Reference::parse("registry3.com/x")), Catch::Contains("is blocked"));
  REQUIRE(c.find(Reference::parse("registry3.com/x")));
  CHECK(c.find(Reference::parse("registry3.com/x"))->primary.insecure);

  RegistriesConf d = conf_of("[[registry]]\nlocation = \"a.io\"\ninsecure = true\n[[registry]]\nlocation = \"b.io\"\n"
                             "credential-helpers = [\"containers-auth.json\"]\n");
  d.add("credential-helpers = [\"pass\", \"containers-auth.json\"]\n[[registry]]\nlocation = \"a.io\"\nblocked = true\n",
        "10-drop.conf", true);
  CHECK(d.tables().size() == 2);
  CHECK_THROWS_WITH(d.pull_sources(Reference::parse("a.io/x")), Catch::Contains("in 10-drop.conf"));
  CHECK_FALSE(d.find(Reference::parse("a.io/x"))->primary.insecure);  // the whole table is replaced
  CHECK(d.credential_helpers == std::vector<std::string>{"pass", "containers-auth.json"});
  CHECK(d.files() == std::vector<std::string>{"test.conf", "10-drop.conf"});
  CHECK_THROWS_WITH(d.add("[registries.block]\nregistries = ['x.io']\n", "20-old.conf", true),
                    Catch::Contains("registries.conf 20-old.conf: a drop-in file must use the version 2 format"));
}

TEST_CASE("registries.conf: what is wrong says which file, line and setting", "[registry][machine]") {
  auto bad = [](const std::string& text) {
    try {
      conf_of(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(bad("[[registry]\nlocation = \"x\"\n"), Catch::StartsWith("registries.conf test.conf:1:"));
  CHECK_THAT(bad("\n[[registry]]\nlocation = \"a.io\"\ninsecure = \"yes\"\n"),
             Catch::Equals("registries.conf test.conf:4: insecure must be true or false"));
  CHECK_THAT(bad("[[registry]]\nlocation = \"https://a.io\"\n"), Catch::Contains("has a URL scheme"));
  CHECK_THAT(bad("[[registry]]\nprefix = \"a.io\"\n"), Catch::Contains("prefix 'a.io' needs a location"));
  CHECK_THAT(bad("[[registry]]\nprefix = \"*.a.io/foo\"\nlocation = \"b.io\"\n"),
             Catch::Contains("a wildcard is allowed only at the start of a prefix"));
  CHECK_THAT(bad("[[registry]]\nprefix = \"a.*.io\"\nlocation = \"b.io\"\n"), Catch::Contains("a wildcard"));
  CHECK_THAT(bad("[[registry]]\nlocation = \"*.a.io\"\n"), Catch::Contains("allowed only in a [[registry]] prefix"));
  CHECK_THAT(bad("[registries.block]\nregistries = ['*.a.io']\n"), Catch::Contains("allowed only in a [[registry]] prefix"));
  CHECK_THAT(bad("[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\ninsecure = true\n"),
             Catch::Contains("a mirror without a location"));
  CHECK_THAT(bad("[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\nlocation = \"m.io\"\npull-from-mirror = \"some\"\n"),
             Catch::Contains("pull-from-mirror is 'some'; it takes all, digest-only or tag-only"));
  CHECK_THAT(bad("[[registry]]\nlocation = \"a.io\"\nmirror-by-digest-only = true\n[[registry.mirror]]\n"
                 "location = \"m.io\"\npull-from-mirror = \"tag-only\"\n"),
             Catch::Contains("cannot be set together"));
  CHECK_THAT(bad("[[registry]]\nprefix = \"a.io/x\"\nlocation = \"a.io\"\n[[registry]]\nprefix = \"a.io/y\"\n"
                 "location = \"a.io\"\ninsecure = true\n"),
             Catch::Contains("location 'a.io' is given twice with different insecure settings"));
  CHECK_THAT(bad("unqualified-search-registries = [\"a.io\"]\n[registries.search]\nregistries = ['b.io']\n"),
             Catch::Contains("mixes the version 1 format"));
  CHECK_THAT(bad("unqualified-search-registries = [\"a.io/path\"]\n"), Catch::Contains("is not HOST[:PORT]"));
  CHECK_THAT(bad("short-name-mode = \"sometimes\"\n"), Catch::Contains("short-name-mode is 'sometimes'"));
  auto c = conf_of("[[registry]]\nlocation = \"a.io\"\nmirrors = []\n");
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0], Catch::Contains("test.conf:3: 'mirrors' is not a setting"));
}

TEST_CASE("registries.conf: the files and drop-in directories, in containers/image's order", "[registry][machine]") {
  TempDir t;
  MachinePaths p;
  p.root = t.path() / "root";
  p.env = {{"HOME", (t.path() / "home").string()}};
  auto load = [&] { return RegistriesConf::load(p); };
  CHECK(load().files().empty());  // nothing there: no settings
  test::write(p.root / "etc/containers/registries.conf", "[[registry]]\nlocation = \"sys.io\"\n");
  test::write(p.root / "etc/containers/registries.conf.d/20-b.conf", "[[registry]]\nlocation = \"b.io\"\n");
  test::write(p.root / "etc/containers/registries.conf.d/10-a.conf", "[[registry]]\nlocation = \"a.io\"\n");
  test::write(p.root / "etc/containers/registries.conf.d/30-c.conf.rpmsave", "not toml [");
  test::write(t.path() / "home/.config/containers/registries.conf.d/05-user.conf", "[[registry]]\nlocation = \"u.io\"\n");
  std::string sys = (p.root / "etc/containers").string(), user = (t.path() / "home/.config/containers").string();
  CHECK(load().files() == std::vector<std::string>{sys + "/registries.conf", sys + "/registries.conf.d/10-a.conf",
                                                   sys + "/registries.conf.d/20-b.conf",
                                                   user + "/registries.conf.d/05-user.conf"});
  // A user's registries.conf takes the place of the system's, and of its drop-ins.
  test::write(t.path() / "home/.config/containers/registries.conf", "");
  CHECK(load().files() ==
        std::vector<std::string>{user + "/registries.conf", user + "/registries.conf.d/05-user.conf"});
  // $CONTAINERS_REGISTRIES_CONF names the main file; one that is missing is an error.
  test::write(t.path() / "mine.conf", "");
  p.env["CONTAINERS_REGISTRIES_CONF"] = (t.path() / "mine.conf").string();
  CHECK(load().files().front() == (t.path() / "mine.conf").string());
  CHECK(load().files().size() == 4);
  p.env["CONTAINERS_REGISTRIES_CONF"] = (t.path() / "missing.conf").string();
  CHECK_THROWS_WITH(load(), Catch::Contains("CONTAINERS_REGISTRIES_CONF names"));
  // A broken drop-in fails the load, naming it; MachineRegistries keeps failing the same way.
  p.env.erase("CONTAINERS_REGISTRIES_CONF");
  test::write(t.path() / "home/.config/containers/registries.conf.d/06-bad.conf", "[[registry]]\nlocation = 5\n");
  MachineRegistries m(p);
  CHECK_THROWS_WITH(m.conf(), Catch::Contains("06-bad.conf:2: location must be a string"));
  CHECK_THROWS_WITH(m.conf(), Catch::Contains("06-bad.conf:2: location must be a string"));
}

TEST_CASE("certs.d: a registry's CAs and client certificate, first directory found", "[registry][machine]") {
  TempDir t;
  MachinePaths p;
  p.root = t.path() / "root";
  p.env = {{"HOME", (t.path() / "home").string()}};
  CHECK(certs_dir("reg.io:5000", p).dir.empty());
  fs::path docker = p.root / "etc/docker/certs.d/reg.io:5000";
  test::write(docker / "ca.crt", "x");
  CHECK(certs_dir("reg.io:5000", p).dir == docker);
  CHECK(certs_dir("reg.io", p).dir.empty());  // the port is part of the name
  fs::path containers = p.root / "etc/containers/certs.d/reg.io:5000";
  test::write(containers / "b.crt", "x");
  test::write(containers / "a.crt", "x");
  test::write(containers / "client.cert", "x");
  test::write(containers / "client.key", "x");
  test::write(containers / "README", "x");
  auto f = certs_dir("reg.io:5000", p);
  CHECK(f.dir == containers);
  CHECK(f.ca_files == std::vector<fs::path>{containers / "a.crt", containers / "b.crt"});
  CHECK(f.client_cert == containers / "client.cert");
  CHECK(f.client_key == containers / "client.key");
  fs::path user = t.path() / "home/.config/containers/certs.d/reg.io:5000";
  test::write(user / "other.cert", "x");
  CHECK_THROWS_WITH(certs_dir("reg.io:5000", p), Catch::Contains("other.cert is a client certificate without its key other.key"));
  fs::remove(user / "other.cert");
  test::write(user / "lonely.key", "x");
  CHECK_THROWS_WITH(certs_dir("reg.io:5000", p), Catch::Contains("lonely.key is a client key without its certificate"));
}

TEST_CASE("auth files: skopeo login's, then the user's, then docker's - the most specific key first", "[registry][machine]") {
  TempDir t;
  CredentialOptions o;
  o.root = t.path() / "root";
  o.env = {{"HOME", (t.path() / "home").string()}, {"XDG_RUNTIME_DIR", (t.path() / "run").string()}};
  auto login = [](const std::string& user) { return R"({"auth":")" + base64_encode(user + ":pw-" + user) + R"("})"; };
  auto who = [&](const std::string& reg, const std::string& repo) {
    auto c = find_credentials(reg, repo, o);
    return c ? c->username + " from " + c->source : std::string("none");
  };
  std::vector<std::string> shown;
  for (const auto& f : auth_files(o)) shown.push_back(f.shown);
  CHECK(shown == std::vector<std::string>{(t.path() / "run/containers/auth.json").string(), "~/.config/containers/auth.json",
                                          "~/.docker/config.json", "~/.dockercfg"});
  CHECK(who("reg.io", "team/app") == "none");
  test::write(t.path() / "home/.dockercfg", R"({"https://reg.io": )" + login("legacy") + "}");
  CHECK(who("reg.io", "team/app") == "legacy from ~/.dockercfg");
  test::write(t.path() / "home/.docker/config.json", R"({"auths": {"reg.io": )" + login("docker") + "}}");
  CHECK(who("reg.io", "team/app") == "docker from ~/.docker/config.json");
  test::write(t.path() / "home/.config/containers/auth.json",
              R"({"auths": {"reg.io": )" + login("user") + R"(, "reg.io/team": )" + login("team") +
                  R"(, "reg.io/team/app": )" + login("app") + R"(, "docker.io/nvidia": )" + login("hub") + "}}");
  CHECK(who("reg.io", "team/app") == "app from ~/.config/containers/auth.json");
  CHECK(who("reg.io", "team/other") == "team from ~/.config/containers/auth.json");
  CHECK(who("reg.io", "solo") == "user from ~/.config/containers/auth.json");
  CHECK(who("reg.io", "teamwork/x") == "user from ~/.config/containers/auth.json");  // whole components only
  CHECK(who("registry-1.docker.io", "nvidia/cuda") == "hub from ~/.config/containers/auth.json");
  CHECK(who("registry-1.docker.io", "library/debian") == "none");
  // The file skopeo login writes comes first; REGISTRY_AUTH_FILE takes its place.
  test::write(t.path() / "run/containers/auth.json", R"({"auths": {"reg.io": )" + login("skopeo") + "}}");
  CHECK(who("reg.io", "team/app") == "skopeo from " + (t.path() / "run/containers/auth.json").string());
  test::write(t.path() / "ci-auth.json", R"({"auths": {"reg.io/team": )" + login("ci") + "}}");
  o.env["REGISTRY_AUTH_FILE"] = (t.path() / "ci-auth.json").string();
  CHECK(who("reg.io", "team/app") == "ci from " + (t.path() / "ci-auth.json").string());
  CHECK(who("reg.io", "solo") == "user from ~/.config/containers/auth.json");
  // Without XDG_RUNTIME_DIR, root's file is /run/containers/0/auth.json (under the root here).
  o.env.erase("REGISTRY_AUTH_FILE");
  o.env.erase("XDG_RUNTIME_DIR");
  CHECK(auth_files(o).front().path == o.root / ("run/containers/" + std::to_string(::getuid())) / "auth.json");
  // A credHelpers entry in an auth file, and registries.conf's credential-helpers, ask helpers.
  test::write(t.path() / "home/bin/docker-credential-vault",
              "#!/bin/sh\nread s\necho '{\"Username\":\"vault-'$s'\",\"Secret\":\"s\"}'\n", 0755);
  o.env["PATH"] = (t.path() / "home/bin").string() + ":/usr/bin:/bin";
  test::write(t.path() / "home/.config/containers/auth.json", R"({"credHelpers": {"reg.io": "vault"}})");
  CHECK(who("reg.io", "team/app") == "vault-reg.io from docker-credential-vault");
  o.helpers = {"vault", "containers-auth.json"};
  CHECK(who("other.io", "x") == "vault-other.io from docker-credential-vault");
  // An identity token is kept apart: never a password.
  test::write(t.path() / "home/.config/containers/auth.json",
              R"({"auths": {"oauth.io": {"auth": ")" + base64_encode("00000000-0000-0000-0000-000000000000:") +
                  R"(", "identitytoken": "refresh-1"}}})");
  o.helpers = {};
  auto id = find_credentials("oauth.io", "x", o);
  REQUIRE(id);
  CHECK(id->identity_token == "refresh-1");
  CHECK(id->password.empty());
  test::write(t.path() / "home/bin/docker-credential-tok",
              "#!/bin/sh\nread s\necho '{\"Username\":\"<token>\",\"Secret\":\"refresh-2\"}'\n", 0755);
  o.helpers = {"tok"};
  id = find_credentials("oauth.io", "x", o);
  REQUIRE(id);
  CHECK(id->identity_token == "refresh-2");
  CHECK(id->username.empty());
  CHECK(id->password.empty());
  test::write(t.path() / "home/.config/containers/auth.json", "{not json");
  o.helpers = {};
  CHECK_THROWS_WITH(find_credentials("reg.io", "x", o), Catch::Contains("~/.config/containers/auth.json is not valid JSON"));
  // A file cut short in a login, or with a control character in a password:
  // the parser's message quotes the token it read last, the secret.
  test::write(t.path() / "home/.config/containers/auth.json", R"({"auths": {"reg.io": {"auth": "dXNlcjpzZWNyZXQtY3V0)");
  CHECK_THROWS_WITH(find_credentials("reg.io", "x", o), !Catch::Contains("dXNlcjpzZWNyZXQtY3V0") && Catch::Contains("is not valid JSON"));
  test::write(t.path() / "home/.config/containers/auth.json", "{\"auths\": {\"reg.io\": {\"password\": \"secret-ctl\x01\"}}}");
  CHECK_THROWS_WITH(find_credentials("reg.io", "x", o), !Catch::Contains("secret-ctl") && Catch::Contains("is not valid JSON"));
}

TEST_CASE("policy.json: the most specific docker scope decides - signatures asked for are refused", "[registry][machine]") {
  auto p = Policy::parse(R"({
    "default": [{"type": "reject"}],
    "transports": {
      "docker": {
        "docker.io/openshift": [{"type": "insecureAcceptAnything"}],
        "docker.io/library/busybox": [{"type": "insecureAcceptAnything"}],
        "docker.io/library/alpine": [{"type": "insecureAcceptAnything"}],
        "docker.io/library/alpine:3.19": [{"type": "reject"}],
        "*.temporary-project.example.com": [{"type": "insecureAcceptAnything"}],
        "hostname:5000/myns/signed": [{"type": "sigstoreSigned", "keyPath": "/etc/pki/cosign.pub"}]
      },
      "dir": {"": [{"type": "insecureAcceptAnything"}]}
    }
  })",
                         "policy.json");
  auto scope = [&](const std::string& r) { return p.scope_for(Reference::parse(r)).value_or("<default>"); };
  CHECK(scope("busybox") == "docker.io/library/busybox");
  CHECK(scope("openshift/origin:4") == "docker.io/openshift");
  CHECK(scope("alpine:3.19") == "docker.io/library/alpine:3.19");
  CHECK(scope("alpine:3.18") == "docker.io/library/alpine");
  CHECK(scope("a.b.temporary-project.example.com:5000/x/y:1") == "*.temporary-project.example.com");
  CHECK(scope("temporary-project.example.com/x") == "<default>");
  CHECK(scope("debian:12") == "<default>");
  CHECK_NOTHROW(p.check(Reference::parse("busybox")));
  CHECK_NOTHROW(p.check(Reference::parse("alpine:3.18")));
  CHECK_THROWS_WITH(p.check(Reference::parse("alpine:3.19")),
                    Catch::Equals("policy.json policy.json rejects docker.io/library/alpine:3.19 (scope \"docker.io/library/alpine:3.19\": reject)"));
  CHECK_THROWS_WITH(p.check(Reference::parse("debian:12")), Catch::Contains("rejects docker.io/library/debian:12 (its default: reject)"));
  CHECK_THROWS_WITH(p.check(Reference::parse("hostname:5000/myns/signed/app:1")),
                    Catch::Contains("wants hostname:5000/myns/signed/app:1 signed (scope \"hostname:5000/myns/signed\": "
                                    "sigstoreSigned), and stackbuild does not verify image signatures; copy it with skopeo copy"));
  // The docker transport's own default comes before the global one.
  auto open = Policy::parse(R"({"default": [{"type": "reject"}], "transports": {"docker": {"": [{"type": "insecureAcceptAnything"}]}}})",
                            "p.json");
  CHECK(open.scope_for(Reference::parse("debian")) == std::optional<std::string>(""));
  CHECK_NOTHROW(open.check(Reference::parse("debian")));
  CHECK_NOTHROW(Policy::parse(R"({"default": [{"type": "insecureAcceptAnything"}]})", "p.json").check(Reference::parse("x.io/y")));
  // Parsed strictly, as containers/image does.
  auto bad = [](const std::string& text) {
    try {
      Policy::parse(text, "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(bad(R"({"defualt": [{"type": "reject"}]})"), Catch::Contains("policy.json p.json: unknown field 'defualt'"));
  CHECK_THAT(bad(R"({"transports": {}})"), Catch::Contains("the default requirements are missing"));
  CHECK_THAT(bad(R"({"default": []})"), Catch::Contains("default must be a non-empty list"));
  CHECK_THAT(bad(R"({"default": [{"type": "acceptAll"}]})"), Catch::Contains("unknown requirement type 'acceptAll'"));
  CHECK_THAT(bad(R"({"default": [{"type": "reject", "why": 1}]})"), Catch::Contains("a reject requirement takes no other field"));
  CHECK_THAT(bad(R"({"default": [{"type": "reject"}], "transports": {"docker": {"x.io": []}}})"),
             Catch::Contains("transports.docker \"x.io\" must be a non-empty list"));
  CHECK_THAT(bad("{"), Catch::Contains("is not valid JSON"));
  // The user's file first, then the system's; neither: no policy.
  TempDir t;
  MachinePaths m;
  m.root = t.path() / "root";
  m.env = {{"HOME", (t.path() / "home").string()}};
  CHECK_FALSE(Policy::load(m));
  test::write(m.root / "etc/containers/policy.json", R"({"default": [{"type": "reject"}]})");
  CHECK_THROWS_WITH(Policy::load(m)->check(Reference::parse("x.io/y")), Catch::Contains("etc/containers/policy.json rejects"));
  test::write(t.path() / "home/.config/containers/policy.json", R"({"default": [{"type": "insecureAcceptAnything"}]})");
  CHECK_NOTHROW(Policy::load(m)->check(Reference::parse("x.io/y")));
}

TEST_CASE("auth files: a field of the wrong type is refused, naming it, never its value",
          "[registry][machine]") {
  TempDir t;
  CredentialOptions o;
  o.root = t.path() / "root";
  o.env = {{"HOME", (t.path() / "home").string()},
           {"REGISTRY_AUTH_FILE", (t.path() / "auth.json").string()}};
  const std::string file = (t.path() / "auth.json").string();
  auto refused = [&](const std::string& doc) -> std::string {
    test::write(t.path() / "auth.json", doc);
    try {
      auto c = find_credentials("reg.io", "team/app", o);
      return c ? "login " + c->username : "anonymous";
    } catch (const Error& e) {
      return e.what();
    }
  };
  // Each of these used to be skipped without a word: the pull went on
  // anonymously and met a 401 that did not say why. skopeo refuses them too.
  CHECK(refused(R"({"auths": []})") == file + ": auths is an array, not an object");
  CHECK(refused(R"({"auths": {"reg.io": {"auth": 5}}})") ==
        file + ": auths[\"reg.io\"].auth is a number, not a string");
  CHECK(refused(R"({"auths": {"reg.io": "dTpw"}})") ==
        file + ": auths[\"reg.io\"] is a string, not an object");
  CHECK(refused(R"({"auths": {"other.io": {"password": ["hunter2"]}}})") ==
        file + ": auths[\"other.io\"].password is an array, not a string");  // any entry; the
                                                                             // secret is not shown
  CHECK(refused(R"({"credHelpers": {"reg.io": 5}})") ==
        file + ": credHelpers[\"reg.io\"] is a number, not a string");
  CHECK(refused(R"({"credHelpers": []})") == file + ": credHelpers is an array, not an object");
  // null is absent, as in Go; other keys of the file are not this reader's business.
  CHECK(
      refused(
          R"({"auths": {"reg.io": {"auth": "dTpw", "email": null}}, "credHelpers": null, "psFormat": 5})") ==
      "login u");
}
