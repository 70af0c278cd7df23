// A fresh private directory under /tmp for one test, removed with what it
// holds (unit tests).
#pragma once
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/rt-unit.XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};
