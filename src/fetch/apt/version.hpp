// Debian package versions ([epoch:]upstream[-revision]) compared as dpkg does
// (Debian Policy 5.6.12), and the relations of dependency fields.
#pragma once

#include <string>
#include <string_view>

namespace sb::apt {

// <0, 0, >0 as a is older than, the same as, or newer than b. Never throws:
// a malformed version compares by its characters, as dpkg does with a warning.
int compare_versions(std::string_view a, std::string_view b);

enum class Relation { Any, Less, LessEq, Eq, GreaterEq, Greater };

// "<<", "<=", "=", ">=", ">>" (and the obsolete "<" = "<=", ">" = ">=").
Relation parse_relation(std::string_view op);
std::string relation_str(Relation r);

// Whether `version` satisfies "op wanted".
bool satisfies(std::string_view version, Relation op, std::string_view wanted);

}  // namespace sb::apt
