// stackbuild's version, as `stackbuild version` prints it and its SBOMs name their creator.
#pragma once

namespace sb {

inline constexpr const char* kStackbuildVersion = "0.1.0";

}  // namespace sb
