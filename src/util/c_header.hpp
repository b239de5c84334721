// Reading what a C header #defines: the version macros of cuDNN's, NCCL's and
// the CUDA runtime's headers, which stackbuild's checks and SBOMs read.
#pragma once

#include <map>
#include <string>

namespace sb {

// `#define NAME VALUE` lines of a C header, NAME -> VALUE's first token. Read
// line by line: cuda_runtime_api.h is half a megabyte.
std::map<std::string, std::string> c_defines(const std::string& text);

// "9.5.1" from CUDNN_MAJOR/MINOR/PATCHLEVEL, "2.26.2" from NCCL_MAJOR/MINOR/PATCH
// (PREFIX then MAJOR, MINOR, and PATCH or PATCHLEVEL); empty when the header
// lacks one of them or one is not a number.
std::string c_header_version(const std::string& text, const std::string& prefix);

}  // namespace sb
