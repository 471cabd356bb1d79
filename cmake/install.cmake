# `cmake --install` yields a CMake package: find_package(lazyjit CONFIG) and lazyjit::lazyjit.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS lazyjit EXPORT lazyjitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/lazyjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT lazyjitTargets NAMESPACE lazyjit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lazyjit)

configure_package_config_file(cmake/lazyjitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/lazyjitConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lazyjit)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lazyjitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lazyjitConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/lazyjitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lazyjit)
