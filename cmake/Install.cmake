# `cmake --install build --prefix P` installs the client library as a CMake
# package: the public headers (include/slip/), libslip_client.a and the
# static libraries it links, and SlipstreamConfig.cmake. An application then
# builds with
#   find_package(Slipstream REQUIRED)
#   target_link_libraries(app Slipstream::client)
# (examples/ is such an application; test/install/ builds it against an
# installed tree). Servers, the store and replication are not installed:
# nothing an application links needs them.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

if(NOT TARGET slip_client)
  message(STATUS "install rules skipped: slip_client is not built (no libfabric?)")
  return()
endif()

# The client and its link closure, named without the slip_ prefix inside the
# package (Slipstream::client, Slipstream::common, ...).
set(SLIP_INSTALLED_LIBS slip_client slip_client_core slip_cluster_access slip_cluster slip_rpc slip_auth
    slip_fabric_ofi slip_fabric slip_erda slip_proto slip_log slip_pm slip_runtime slip_common)
set(SLIP_PACKAGE_HAS_ZOOKEEPER OFF)
if(TARGET slip_cluster_zookeeper)
  list(APPEND SLIP_INSTALLED_LIBS slip_cluster_zookeeper)
  set(SLIP_PACKAGE_HAS_ZOOKEEPER ON)
endif()
foreach(lib ${SLIP_INSTALLED_LIBS})
  string(REGEX REPLACE "^slip_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
endforeach()

install(TARGETS ${SLIP_INSTALLED_LIBS} EXPORT SlipstreamTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/slip DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT SlipstreamTargets NAMESPACE Slipstream::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Slipstream)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SlipstreamConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/SlipstreamConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Slipstream)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/SlipstreamConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/SlipstreamConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/SlipstreamConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Slipstream)
