// Catalog versions and ranges ("12.6", ">=12.4,<13"), from the catalog, a
// recipe's matrix and --set.
#include "catalog/version.hpp"
#include "fuzz.hpp"

SB_FUZZ_TARGET(catalog_version) {
  auto parts = sb::fuzz::split(sb::fuzz::text(data, size), 3);
  using sb::catalog::Version;
  using sb::catalog::VersionRange;
  std::string error;
  auto a = Version::parse(parts[0], &error);
  auto b = Version::parse(parts[1], &error);
  auto range = VersionRange::parse(parts[2], &error);
  if (a && b) {
    sb::fuzz::check((*a <=> *b) == 0 ? (*b <=> *a) == 0 : ((*a <=> *b) < 0) == ((*b <=> *a) > 0),
                    "catalog version order is not antisymmetric");
  }
  if (a) {
    auto again = Version::parse(a->str(), &error);
    sb::fuzz::check(again && *again == *a, "catalog version does not parse back");
    if (range) (void)range->contains(*a);
  }
}
