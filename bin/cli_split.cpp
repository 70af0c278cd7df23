// Splitting options from the container's command (pure, CLI side).
#include "cli_split.hpp"

namespace rt::cli {
namespace {

bool takes_value(const CLI::App& sub, const std::string& name) {
  const CLI::Option* opt = sub.get_option_no_throw(name);
  return opt && opt->get_items_expected_min() > 0;
}

} // namespace

Split split_command(const CLI::App& sub, const std::vector<std::string>& args) {
  return split_command([&](const std::string& name) { return takes_value(sub, name); }, args);
}

Split split_command(const std::function<bool(const std::string&)>& takes_value_fn,
                    const std::vector<std::string>& args) {
  auto takes_value = [&](const std::string& name) { return takes_value_fn(name); };
  Split s;
  size_t i = 0;
  auto take_image_and_rest = [&](size_t at) {
    if (at < args.size()) {
      s.options_and_image.push_back(args[at]);
      size_t rest = at + 1;
      if (rest < args.size() && args[rest] == "--") ++rest;
      s.command.assign(args.begin() + static_cast<long>(rest), args.end());
    }
  };
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--") {
      s.options_and_image.push_back(a);
      take_image_and_rest(i + 1);
      return s;
    }
    if (a.size() > 2 && a.starts_with("--")) {
      s.options_and_image.push_back(a);
      if (a.find('=') == std::string::npos && takes_value(a) && i + 1 < args.size())
        s.options_and_image.push_back(args[++i]);
      ++i;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      s.options_and_image.push_back(a);
      // A cluster of short flags; the first one taking a value takes the
      // rest of the word, or the next word.
      for (size_t c = 1; c < a.size(); ++c) {
        if (takes_value(std::string("-") + a[c])) {
          if (c + 1 == a.size() && i + 1 < args.size()) s.options_and_image.push_back(args[++i]);
          break;
        }
      }
      ++i;
      continue;
    }
    take_image_and_rest(i);
    return s;
  }
  return s;
}

} // namespace rt::cli
