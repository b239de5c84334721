// apt's configuration as the apt stage reads it (fetch/apt/config.hpp): the
// apt.conf(5) syntax (checked against apt-config itself where it is
// installed), the files a machine's tree holds and the order apt reads them
// in, apt_auth.conf(5) logins, and the route (proxy, CA, checks, login) apt's
// http and https methods would take for a URL, down to the requests libcurl
// sends.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <mutex>
#include <optional>

#include "fetch/apt/config.hpp"
#include "helpers.hpp"
#include "http_server.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/http.hpp"
#include "util/process.hpp"

using namespace sb;
using apt::AptConfig;

namespace {

std::string dump_of(const std::string& text) {
  AptConfig c;
  c.parse(text, "t.conf");
  return c.dump();
}

std::string parse_error(const std::string& text) {
  try {
    dump_of(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Sets (or unsets, with nullopt) environment variables for the life of the
// object, then puts back what was there.
struct EnvFor {
  std::map<std::string, std::optional<std::string>> saved;
  explicit EnvFor(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = getenv(k.c_str());
      saved[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }
  ~EnvFor() {
    for (const auto& [k, v] : saved)
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
  }
};

apt::AptNetwork network_of(const std::string& conf, const std::string& auth = "") {
  AptConfig c;
  c.parse(conf, "net.conf");
  return apt::AptNetwork(std::move(c), apt::parse_auth_conf(auth, "auth.conf"));
}

// The lines of an apt-config dump under the tops `T` and `Acquire::http`,
// which apt's own defaults do not set.
std::string ours_only(const std::string& dump) {
  std::string out;
  for (size_t pos = 0; pos < dump.size();) {
    size_t nl = dump.find('\n', pos);
    std::string line = dump.substr(pos, nl - pos);
    pos = nl == std::string::npos ? dump.size() : nl + 1;
    if (line.starts_with("T ") || line.starts_with("T::") || line.starts_with("Acquire::http"))
      out += line + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("apt config: statements, blocks, lists and comments read as apt reads them",
          "[apt][config]") {
  CHECK(
      dump_of(
          "T::a \"1\"; T::b \"x\" ; # a comment\nT::c \"has # hash\"; T::d \"two // slashes\";") ==
      "T \"\";\nT::a \"1\";\nT::b \"x\";\nT::c \"has # hash\";\nT::d \"two // slashes\";\n");
  CHECK(dump_of("T { a \"1\"; b { c \"2\"; }; };") ==
        "T \"\";\nT::a \"1\";\nT::b \"\";\nT::b::c \"2\";\n");
  CHECK(dump_of("T::l { \"x\"; \"y\"; }; T::l:: \"z\";") ==
        "T \"\";\nT::l \"\";\nT::l:: \"x\";\nT::l:: \"y\";\nT::l:: \"z\";\n");
  // Names are case-insensitive; the first spelling stays, the last value wins.
  CHECK(dump_of("T::A \"1\"; t::a \"2\";") == "T \"\";\nT::A \"2\";\n");
  // Quoted parts: joined by a space when apart, glued when touching; quotes
  // in a name go.
  CHECK(dump_of("T::a \"1\"  \"2\"; T::b \"1\"x\"2\"; \"T::c\" \"3\"; T\"::d\" \"4\";") ==
        "T \"\";\nT::a \"1 2\";\nT::b \"1x2\";\nT::c \"3\";\nT::d \"4\";\n");
  CHECK(dump_of("/* a\nT::x \"no\"; */ T::y \"yes\"; T::z \"1\" /* mid */;") ==
        "T \"\";\nT::y \"yes\";\nT::z \"1\";\n");
  CHECK(dump_of("T::a \"a;b{c}\"; T::b\n\"2\";") == "T \"\";\nT::a \"a;b{c}\";\nT::b \"2\";\n");
  // A block left open, or closed once too often, is no error (apt says nothing).
  CHECK(dump_of("T { a \"1\"; ") == "T \"\";\nT::a \"1\";\n");
  CHECK(dump_of("T::a \"1\"; }; T::b \"2\";") == "T \"\";\nT::a \"1\";\nT::b \"2\";\n");
  // #clear empties the node and drops what is below it.
  CHECK(dump_of("T::a \"1\"; T::a::b \"2\"; #clear t::A; T::c \"3\";") ==
        "T \"\";\nT::a \"\";\nT::c \"3\";\n");
  CHECK(dump_of("T::l { \"x\"; }; #clear T::l; T::l:: \"z\";") ==
        "T \"\";\nT::l \"\";\nT::l:: \"z\";\n");

  AptConfig c;
  c.parse("Acquire { http { Proxy \"http://p:3128\"; }; };\nACQUIRE::https::CaInfo \"/ca.pem\";",
          "/etc/apt/x");
  CHECK(c.find("acquire::HTTP::proxy") == "http://p:3128");
  CHECK(c.where("Acquire::http::Proxy") == "/etc/apt/x:1");
  CHECK(c.find("Acquire::https::CAInfo") == "/ca.pem");
  CHECK(c.where("Acquire::https::CaInfo") == "/etc/apt/x:2");
  CHECK(c.find("Acquire::ftp::Proxy").empty());
}

TEST_CASE("apt config: what apt refuses is refused, saying the file and line", "[apt][config]") {
  CHECK(parse_error("T::a \"1\";\nT::b \"2\"") ==
        "apt configuration t.conf:2: extra junk at end of file (a statement without its ';'?)");
  CHECK(parse_error("T::a b c;") == "apt configuration t.conf:1: extra junk after value");
  CHECK(parse_error("T::a \"1\" x;") == "apt configuration t.conf:1: extra junk after value");
  CHECK(parse_error("\n{ a \"1\"; };") ==
        "apt configuration t.conf:2: a block starts with no name");
  CHECK(parse_error("T { #clear a; };") ==
        "apt configuration t.conf:1: directives can only be used at the top level (#clear)");
  CHECK(parse_error("#clear;") == "apt configuration t.conf:1: #clear wants a name");
  CHECK(parse_error("T::a \"multi\nline\";") ==
        "apt configuration t.conf:1: a quoted value does not end on its line");
  CHECK_THAT(parse_error("#include \"/nonexistent/x.conf\";"),
             Catch::Contains("#include names /nonexistent/x.conf, which does not exist"));
}

TEST_CASE("apt config: a machine's files in apt's order, #include, and the names apt skips",
          "[apt][config]") {
  TempDir tmp;
  fs::path root = tmp.path();
  test::write(root / "etc/apt/apt.conf.d/10first", "T::order \"10first\"; T::only10 \"yes\";\n");
  test::write(root / "etc/apt/apt.conf.d/20second.conf",
              "T::order \"20second\";\n#include \"" + (root / "inc/more.conf").string() + "\";\n");
  test::write(root / "inc/more.conf", "T::included \"yes\";\n");
  test::write(root / "etc/apt/apt.conf.d/30skipped.disabled", "T::order \"wrong\";\n");
  test::write(root / "etc/apt/apt.conf.d/40bad name", "T::order \"wrong\";\n");
  test::write(root / "etc/apt/apt.conf.d/.hidden", "T::order \"wrong\";\n");
  test::write(root / "etc/apt/apt.conf", "T::main \"read last\";\n");
  AptConfig c = apt::machine_apt_config(root, false);
  CHECK(c.find("T::order") == "20second");
  CHECK(c.find("T::only10") == "yes");
  CHECK(c.find("T::included") == "yes");
  CHECK(c.find("T::main") == "read last");
  CHECK(c.where("T::included") == (root / "inc/more.conf").string() + ":1");

  // APT_CONFIG comes first, and its Dir::Etc::parts moves the directory.
  test::write(root / "other/parts/50x", "T::order \"other parts\";\n");
  test::write(root / "apt-config",
              "Dir::Etc::parts \"" + (root / "other/parts").string() + "\";\nT::env \"yes\";\n");
  {
    EnvFor env({{"APT_CONFIG", (root / "apt-config").string()}});
    AptConfig e = apt::machine_apt_config(root, true);
    CHECK(e.find("T::env") == "yes");
    CHECK(e.find("T::order") == "other parts");
    CHECK(e.find("T::main") == "read last");
  }

  // An error says which file.
  test::write(root / "etc/apt/apt.conf.d/60broken", "T::x \"1\"\n");
  CHECK_THROWS_WITH(
      apt::machine_apt_config(root, false),
      Catch::Contains((root / "etc/apt/apt.conf.d/60broken").string() + ":2: extra junk"));
}

TEST_CASE("apt config: the same reading as apt-config dump, fixtures and this machine's own",
          "[apt][config]") {
  if (find_on_path("apt-config").empty()) {
    WARN("SKIPPED: apt-config is not installed");
    return;
  }
  TempDir tmp;
  fs::path d = tmp.path();
  test::write(d / "parts/10proxy", R"(// proxies
Acquire::http::Proxy "http://proxy.example:3128/";
Acquire::http::Proxy::mirror.example "DIRECT";
Acquire { https { Proxy "socks5h://127.0.0.1:9050"; CaInfo "/etc/ssl/ca.pem"; mirror.example::Verify-Peer "false"; }; };
)");
  test::write(d / "parts/20lists.conf", R"(/* lists, values and #clear */
T::list { "a"; "b c"; };
T::list:: "d";
T::Case "1"; t::case "2";
T::joined "x" "y"; T::glued "x"y"z";
"T::quoted" "q"; T"::half" "h";
T::gone { x "1"; y "2"; };
#clear T::gone;
T::deep { a { b { c "3"; }; }; };
T::semi "a;b{c}";   # a comment after
T::multi
  "on the next line";
)");
  test::write(d / "parts/30ignored.bak", "T::ignored \"yes\";\n");
  test::write(d / "main.conf",
              "T::main \"last\";\nAcquire::https::Proxy::mirror.example \"DIRECT\";\n");
  test::write(d / "apt.conf", "Dir::Etc::parts \"" + (d / "parts").string() +
                                  "\";\nDir::Etc::main \"" + (d / "main.conf").string() + "\";\n");
  std::map<std::string, std::string> env = current_environment();
  env["APT_CONFIG"] = (d / "apt.conf").string();
  ProcessResult apt = run_process({{"apt-config", "dump"}, env, {}, true, false, {}});
  REQUIRE(apt.exit_status == 0);
  std::string theirs = ours_only(apt.output);
  REQUIRE(theirs.find("T::list:: \"b c\";") !=
          std::string::npos);  // the comparison compares something
  {
    EnvFor e({{"APT_CONFIG", (d / "apt.conf").string()}});
    CHECK(ours_only(apt::machine_apt_config("/", true).dump()) == theirs);
  }

  // This machine's configuration: every value a file set is one apt-config
  // prints (apt adds its defaults around them, and makes a list of some
  // values, as of Acquire::Languages "none").
  env.erase("APT_CONFIG");
  ProcessResult mine = run_process({{"apt-config", "dump"}, env, {}, true, false, {}});
  REQUIRE(mine.exit_status == 0);
  EnvFor e({{"APT_CONFIG", std::nullopt}});
  std::string ours = apt::machine_apt_config("/", true).dump(true);
  std::string all = "\n" + mine.output;
  for (size_t pos = 0; pos < ours.size();) {
    size_t nl = ours.find('\n', pos);
    std::string line = ours.substr(pos, nl - pos);
    pos = nl + 1;
    std::string as_item = line.substr(0, line.find(' ')) + ":: " + line.substr(line.find(' ') + 1);
    INFO(line);
    CHECK((all.find("\n" + line + "\n") != std::string::npos ||
           all.find("\n" + as_item + "\n") != std::string::npos));
  }
}

TEST_CASE("apt config: the proxy, CA and checks apt's methods would use for a URL",
          "[apt][config]") {
  TempDir tmp;
  test::write(tmp.path() / "ca.pem", "not read here");
  std::string ca = (tmp.path() / "ca.pem").string();
  auto net = network_of(
      "Acquire::http::Proxy \"http://proxy:3128\";\n"
      "Acquire::http::Proxy::direct.example \"DIRECT\";\n"
      "Acquire::http::Proxy::other.example \"http://other-proxy:8080\";\n"
      "Acquire::https::CaInfo \"" +
      ca +
      "\";\n"
      "Acquire::https::lax.example::Verify-Peer \"false\";\n"
      "Acquire::https::Verify-Host::named.example \"no\";\n");
  auto r = net.route("http://deb.example/debian/dists/x/InRelease");
  CHECK(r.proxy == std::optional<std::string>("http://proxy:3128"));
  CHECK(r.ca_files.empty());  // a CA is for https
  CHECK(net.route("http://direct.example/x").proxy ==
        std::optional<std::string>(""));  // DIRECT: none at all
  CHECK(net.route("http://OTHER.example:8000/x").proxy ==
        std::optional<std::string>("http://other-proxy:8080"));
  // https falls back to the http method's settings, host first.
  auto s = net.route("https://direct.example/x");
  CHECK(s.proxy == std::optional<std::string>(""));
  CHECK(s.ca_files == std::vector<fs::path>{ca});
  CHECK(s.verify_peer);
  CHECK(s.verify_host);
  CHECK_FALSE(net.route("https://lax.example/x").verify_peer);
  CHECK(net.route("https://lax.example/x").verify_host);
  CHECK_FALSE(net.route("https://named.example/x").verify_host);
  CHECK(net.route("file:///srv/repo").proxy == std::nullopt);
  // Nothing said: libcurl's own proxy variables decide.
  CHECK(network_of("").route("https://deb.example/x").proxy == std::nullopt);
  // https's own setting wins over http's.
  CHECK(network_of("Acquire::http::Proxy \"http://a:1\"; Acquire::https::Proxy \"http://b:2\";")
            .route("https://deb.example/x")
            .proxy == std::optional<std::string>("http://b:2"));
  // A CaInfo that is not there is an error naming the setting and its file.
  auto missing = network_of("Acquire::https::deb.example::CaInfo \"/nonexistent/ca.pem\";");
  CHECK_THROWS_WITH(missing.route("https://deb.example/x"),
                    "Acquire::https::deb.example::CaInfo (net.conf:1) names /nonexistent/ca.pem, "
                    "which does not exist");
  CHECK_NOTHROW(missing.route("https://elsewhere.example/x"));
}

TEST_CASE("apt config: auth.conf logins match as apt_auth.conf(5) says", "[apt][config]") {
  auto entries = apt::parse_auth_conf(
      "# logins\nmachine example.org\nlogin apt\npassword debian\n"
      "machine example.org/private login p password secret\n",
      "auth.conf");
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].host == "example.org");
  CHECK(entries[0].login == "apt");
  CHECK(entries[0].where == "auth.conf:2");
  CHECK(entries[1].path == "/private");
  // The man page's example: which machine lines apply to
  // https://example.org/debian.
  auto login_for = [](const std::string& machine, const std::string& url) {
    auto net = network_of("", "machine " + machine + " login apt password debian\n");
    return net.route(url).username;
  };
  const std::string url = "https://example.org/debian/dists/bookworm/InRelease";
  for (const char* m : {"example.org", "example.org/deb", "example.org/debian",
                        "example.org/debian/", "https://example.org"}) {
    INFO(m);
    CHECK(login_for(m, url) == "apt");
  }
  for (const char* m : {"example.org:443", "example.org/deb/", "example.org/ubuntu", "example.orga",
                        "example.net"}) {
    INFO(m);
    CHECK(login_for(m, url).empty());
  }
  // Without a scheme a line is for https only; http needs it said.
  CHECK(login_for("example.org", "http://example.org/debian").empty());
  CHECK(login_for("http://example.org", "http://example.org/debian") == "apt");
  CHECK(login_for("example.org:8443", "https://example.org:8443/debian") == "apt");
  // A login in the URL itself stays.
  CHECK(login_for("example.org", "https://me@example.org/debian").empty());
  // The first match wins: files are read in order and entries in order.
  auto net =
      network_of("",
                 "machine example.org/private login p password secret\nmachine example.org login a "
                 "password b\n");
  auto r = net.route("https://example.org/private/x");
  CHECK(r.username == "p");
  CHECK(r.password == "secret");
  CHECK(net.route("https://example.org/public/x").username == "a");

  TempDir tmp;
  test::write(tmp.path() / "etc/apt/auth.conf.d/10a.conf",
              "machine example.org login first password 1\n", 0600);
  test::write(tmp.path() / "etc/apt/auth.conf.d/20b",
              "machine example.org login skipped password 2\n", 0600);
  test::write(tmp.path() / "etc/apt/auth.conf", "machine example.org login main password 3\n",
              0600);
  auto all = apt::machine_auth_entries(AptConfig(), tmp.path());
  REQUIRE(all.size() == 2);  // auth.conf.d reads only *.conf
  CHECK(all[0].login == "first");
  CHECK(all[1].login == "main");
}

TEST_CASE("apt config: a login in a repository URL is taken out of it and used below it", "[apt][config]") {
  std::string uri = "https://me%40corp:p%3Ass@Mirror.example:8443/debian";
  auto login = apt::take_url_login(uri);
  REQUIRE(login);
  CHECK(uri == "https://Mirror.example:8443/debian");
  CHECK(login->login == "me@corp");
  CHECK(login->password == "p:ss");
  CHECK(login->host == "mirror.example");
  CHECK(login->port == "8443");
  CHECK(login->path == "/debian/");
  std::string plain = "http://deb.example/debian", at_in_path = "http://deb.example/a@b";
  CHECK_FALSE(apt::take_url_login(plain));
  CHECK_FALSE(apt::take_url_login(at_in_path));
  CHECK(at_in_path == "http://deb.example/a@b");

  auto net = network_of("", "machine mirror.example login from-auth-conf password x\n");
  CHECK(net.route("https://mirror.example:8443/debian/dists/x/InRelease").username == "from-auth-conf");
  net.add_login(*login);
  auto r = net.route("https://mirror.example:8443/debian/dists/x/InRelease");
  CHECK(r.username == "me@corp");  // the URL's login wins, as in apt
  CHECK(r.password == "p:ss");
  CHECK(net.route("https://mirror.example:8443/debian-security/x").username == "from-auth-conf");  // not below it
  CHECK(net.route("https://mirror.example/debian/x").username == "from-auth-conf");                // another port
}

TEST_CASE("http: a route's proxy, DIRECT and login reach the requests libcurl sends", "[apt][config][http]") {
  std::mutex m;
  std::vector<std::string> at_proxy, at_origin;
  test::HttpServer origin([&](const test::HttpRequest& r) {
    std::lock_guard g(m);
    at_origin.push_back(r.path + " " +
                        (r.headers.count("authorization") ? r.headers.at("authorization") : "-"));
    return test::http_response(200, "origin");
  });
  test::HttpServer proxy([&](const test::HttpRequest& r) {
    std::lock_guard g(m);
    at_proxy.push_back(r.path);  // a forward proxy gets the absolute URL
    return test::http_response(200, "proxy");
  });
  AptConfig conf;
  conf.parse("Acquire::http::Proxy \"" + proxy.url() + "\";\nAcquire::http::Proxy::localhost \"DIRECT\";\n", "c");
  auto net = std::make_shared<apt::AptNetwork>(
      std::move(conf), apt::parse_auth_conf("machine http://localhost/secret login apt password debian\n", "a"));
  http::ClientOptions o;
  o.route = [net](const std::string& url) { return net->route(url); };
  http::Client client(o);
  EnvFor env({{"http_proxy", proxy.url()}, {"no_proxy", std::nullopt}, {"NO_PROXY", std::nullopt}});
  http::Request req;
  req.url = origin.url("/via-proxy");
  CHECK(client.perform(req).body == "proxy");
  CHECK(at_proxy == std::vector<std::string>{origin.url("/via-proxy")});
  // DIRECT for localhost: straight to the origin, though http_proxy is set.
  req.url = "http://localhost:" + std::to_string(origin.port()) + "/secret/file";
  CHECK(client.perform(req).body == "origin");
  REQUIRE(at_origin.size() == 1);
  CHECK(at_origin[0] == "/secret/file Basic YXB0OmRlYmlhbg==");  // apt:debian
  CHECK(at_proxy.size() == 1);
}

TEST_CASE("apt config: Proxy-Auto-Detect is asked once per host, after the host's own setting", "[apt][config]") {
  TempDir tmp;
  fs::path calls = tmp.path() / "calls";
  fs::path detect = tmp.path() / "detect";
  test::write(detect,
              "#!/bin/sh\necho \"$1\" >>" + calls.string() +
                  "\ncase \"$1\" in\n"
                  "  http://cached.example) echo http://apt-cacher:3142 ;;\n"
                  "  https://direct.example:8443) echo DIRECT ;;\n"
                  "  http://broken.example) exit 3 ;;\n"
                  "esac\n",
              0755);
  auto net = network_of("Acquire::http::Proxy-Auto-Detect \"" + detect.string() +
                        "\";\nAcquire::http::Proxy \"http://generic:1\";\n"
                        "Acquire::http::Proxy::own.example \"http://own:2\";\n");
  CHECK(net.route("http://cached.example/debian/x").proxy == std::optional<std::string>("http://apt-cacher:3142"));
  CHECK(net.route("http://cached.example/debian/y").proxy == std::optional<std::string>("http://apt-cacher:3142"));
  // https asks with the https URL and falls back to http's command.
  CHECK(net.route("https://direct.example:8443/x").proxy == std::optional<std::string>(""));
  // Nothing printed: the method's proxy.
  CHECK(net.route("http://quiet.example/x").proxy == std::optional<std::string>("http://generic:1"));
  // The host's own setting: the command is not asked.
  CHECK(net.route("http://own.example/x").proxy == std::optional<std::string>("http://own:2"));
  CHECK(test::slurp(calls) == "http://cached.example\nhttps://direct.example:8443\nhttp://quiet.example\n");
  CHECK_THROWS_WITH(net.route("http://broken.example/x"),
                    "Acquire::http::Proxy-Auto-Detect (net.conf:1): '" + detect.string() +
                        " http://broken.example' exited with status 3");
  auto missing = network_of("Acquire::http::ProxyAutoDetect \"/nonexistent/detect\";");
  CHECK_THROWS_WITH(missing.route("http://a.example/x"), Catch::Contains("cannot run '/nonexistent/detect'") &&
                                                             Catch::Contains("Acquire::http::ProxyAutoDetect"));
}
