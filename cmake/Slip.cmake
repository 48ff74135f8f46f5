# Helpers shared by every module's CMakeLists.txt.

set(SLIP_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough)

function(slip_apply_flags target)
  target_compile_options(${target} PRIVATE ${SLIP_WARNINGS})
  if(SLIP_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# slip_library(NAME SOURCES a.cc b.cc DEPS other_lib ...)
# Creates library slip_<NAME>; headers are included as "<module>/<file>.h" from src/.
function(slip_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(slip_${name} STATIC ${ARG_SOURCES})
  target_include_directories(slip_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(slip_${name} PUBLIC ${ARG_DEPS})
  slip_apply_flags(slip_${name})
endfunction()

# slip_test(NAME SOURCES a_test.cc DEPS slip_x ... [LABELS l1 l2])
# One gtest binary per module; every TEST becomes a ctest entry.
function(slip_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/test)
  slip_apply_flags(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()
