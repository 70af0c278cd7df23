// A private directory under /tmp for one fuzz target, made on first use and
// kept for the whole run (fuzz targets).
#pragma once
#include <stdlib.h>

#include <cstdlib>
#include <string>

inline const std::string& scratch_dir() {
  static const std::string d = [] {
    char tmpl[] = "/tmp/rt-fuzz.XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    return std::string(tmpl);
  }();
  return d;
}
