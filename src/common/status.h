// The public Status/Result (include/slip/status.h) and the macros the
// implementation propagates errors with. Kept out of the public header so
// an application's namespace gets no SLIP_* macros.
#pragma once

#include <utility>

#include "slip/status.h"

// Propagate a non-OK Status to the caller.
#define SLIP_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::slip::Status _slip_s = (expr);            \
    if (!_slip_s.ok()) return _slip_s;          \
  } while (0)

#define SLIP_CONCAT_INNER(a, b) a##b
#define SLIP_CONCAT(a, b) SLIP_CONCAT_INNER(a, b)
// SLIP_ASSIGN_OR_RETURN(auto x, MakeX()): unwraps a Result or returns its Status.
#define SLIP_ASSIGN_OR_RETURN(lhs, expr) \
  SLIP_ASSIGN_OR_RETURN_IMPL(SLIP_CONCAT(_slip_r_, __LINE__), lhs, expr)
#define SLIP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
