// The driver of one image: recipe in, image out (the whole job, with the
// matrix, the gate and the push: run_build.hpp). The values it takes and
// gives are in build_options.hpp.
#pragma once

#include <optional>
#include <vector>

#include "pipeline/build_options.hpp"

namespace sb {

// The build's timestamp: --source-date-epoch, else the recipe's, else
// $SOURCE_DATE_EPOCH, else 0.
int64_t choose_source_date_epoch(const Recipe& recipe, std::optional<int64_t> flag);

// Builds the layers and the image documents; writes nothing outside the store
// (BuildOptions::output and format are not used).
BuildResult build_image(const Recipe& recipe, const Store& store, const BuildOptions& options, Status& status);

// Writes `images` (and, in an OCI layout, `indexes`) to options.output in
// options.format, naming the output in any error.
void write_images(const std::vector<TaggedImage>& images, const std::vector<TaggedIndex>& indexes, const Store& store,
                  const BuildOptions& options);

// build_image, then write_images.
BuildResult build_recipe(const Recipe& recipe, const Store& store, const BuildOptions& options, Status& status);

}  // namespace sb
