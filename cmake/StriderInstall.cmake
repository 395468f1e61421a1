# cmake --install: headers, the library, the apps and a package config for find_package(strider).
include(CMakePackageConfigHelpers)
install(TARGETS strider EXPORT striderTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/strider DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/strider/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strider)
if(STRIDER_BUILD_APPS AND STRIDER_APPS)
  install(TARGETS ${STRIDER_APPS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT striderTargets NAMESPACE strider:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strider)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/striderConfig.cmake.in
  ${PROJECT_BINARY_DIR}/striderConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strider)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/striderConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/striderConfig.cmake ${PROJECT_BINARY_DIR}/striderConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strider)
