// A named option from Python as its smax enum, shared by the extension's translation
// units: an unknown name is an smax::Error (Errc::option) naming the op, the option,
// the name given and the names allowed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "smax/error.hpp"

namespace smax_python {

template <class T>
T parse_choice(std::string_view op, std::string_view what, const std::string& name,
               std::optional<T> (*parse)(std::string_view), std::string_view choices) {
  if (auto value = parse(name)) return *value;
  throw smax::Error(smax::Errc::option, std::string(op) + ": unknown " + std::string(what) + " '" + name +
                                            "'; use " + std::string(choices));
}

}  // namespace smax_python
