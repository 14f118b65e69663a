# --- install and package (make install, make deb) ------------------------------------------------
# Included at the end of CMakeLists.txt: needs RTB_TOOLS and the cli_* tests defined above.
# `cmake --install build/release --prefix P` puts the tools in P/bin, one man page per tool in
# P/share/man/man1 and a bash completion per tool in P/share/bash-completion/completions; `make deb`
# (CPack) packs the same tree under /usr.
include(GNUInstallDirs)
# Debian keeps a package's documents in /usr/share/doc/<package> (GNUInstallDirs would use the
# CMake project name).
set(RTB_DOC_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/rl-trainer-bench)

install(TARGETS ${RTB_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES README.md LICENSE DESTINATION ${RTB_DOC_DIR})
file(GLOB RTB_TOOL_DOCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${RTB_TOOL_DOCS} DESTINATION ${RTB_DOC_DIR}/docs)

# Man pages are generated at build time from each tool's --help and --version by Debian's
# help2man, so they never drift from the tools. Without help2man the configure step stops (make
# deps installs it): a package or an install without its man pages would be a silent default.
# RTB_MAN_PAGES=OFF builds without them, on purpose.
option(RTB_MAN_PAGES "Generate man pages with help2man (Debian package help2man)" ON)
set(RTB_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(RTB_COMPLETION_DIR ${CMAKE_BINARY_DIR}/bash-completion)
if(RTB_MAN_PAGES)
  find_program(HELP2MAN help2man)
  find_program(GZIP gzip)
  if(NOT HELP2MAN OR NOT GZIP)
    message(FATAL_ERROR "help2man (and gzip) are needed to generate the man pages: install the "
                        "Debian package help2man (make deps does), or configure with "
                        "-DRTB_MAN_PAGES=OFF to build without man pages")
  endif()
endif()

# The NAME line of each man page (the rest of the page is the tool's --help). A new tool needs a
# line here: the configure step says so.
set(RTB_SUMMARY_render-bench "turn a launcher's DRY_RUN output into a standalone bench JobSet of the RL trainer")
set(RTB_SUMMARY_diff-renders "compare two renders (DRY_RUN outputs or JobSets), flags flag by flag")
set(RTB_SUMMARY_diff-configs "compare the resolved MaxText configs of two runs, or a render's MaxText flags")
set(RTB_SUMMARY_aot-check "check that a bench variant fits in HBM with MaxText's AOT compile, no TPU needed")
set(RTB_SUMMARY_aot-summarize "summarize the memory and cost analyses and out-of-memory reports in MaxText logs")
set(RTB_SUMMARY_hlo-overlap "report which collectives a scheduled HLO dump hides behind compute")
set(RTB_SUMMARY_check-payload "build, verify and measure the bench's synthetic micro-batch payload")
set(RTB_SUMMARY_bench-report "step times, micro-batch timelines, A/B verdicts and numerics gates from bench logs")
set(RTB_SUMMARY_profile-report "per-step device time by category and op from a jax.profiler capture, and A/B of two")

set(RTB_GENERATED_DOCS "")
foreach(tool ${RTB_TOOLS})
  if(RTB_MAN_PAGES)
    if(NOT DEFINED RTB_SUMMARY_${tool})
      message(FATAL_ERROR "cmake/install.cmake: no RTB_SUMMARY_${tool} (the NAME line of its man page)")
    endif()
    set(page ${RTB_MAN_DIR}/${tool}.1)
    add_custom_command(
      OUTPUT ${page}.gz
      COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:${tool}> "-DSUMMARY=${RTB_SUMMARY_${tool}}"
              -DHELP2MAN=${HELP2MAN}
              -DOUTPUT=${page} -P ${CMAKE_SOURCE_DIR}/cmake/man-page.cmake
      # -n: no name or time stamp in the gzip header, so the same page gives the same bytes.
      COMMAND ${GZIP} -9nf ${page}
      DEPENDS ${tool} ${CMAKE_SOURCE_DIR}/cmake/man-page.cmake ${CMAKE_SOURCE_DIR}/cmake/tool-help.cmake
              ${CMAKE_SOURCE_DIR}/cmake/install.cmake
      COMMENT "Man page of ${tool} (help2man)"
      VERBATIM)
    list(APPEND RTB_GENERATED_DOCS ${page}.gz)
    install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
  set(completion ${RTB_COMPLETION_DIR}/${tool})
  add_custom_command(
    OUTPUT ${completion}
    COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:${tool}> -DNAME=${tool} -DOUTPUT=${completion}
            -P ${CMAKE_SOURCE_DIR}/cmake/bash-completion.cmake
    DEPENDS ${tool} ${CMAKE_SOURCE_DIR}/cmake/bash-completion.cmake ${CMAKE_SOURCE_DIR}/cmake/tool-help.cmake
    COMMENT "Bash completion of ${tool}"
    VERBATIM)
  list(APPEND RTB_GENERATED_DOCS ${completion})
  # bash-completion loads completions/<command> on first use of <command>.
  install(FILES ${completion} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
endforeach()
add_custom_target(tool_docs ALL DEPENDS ${RTB_GENERATED_DOCS})

# --- Debian package (CPack DEB) -------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rl-trainer-bench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Bench tools for the RL trainer of large MoE models (MaxText, Tunix GRPO, TPU)")
set(CPACK_PACKAGE_DESCRIPTION
    "Turns the launcher's DRY_RUN output of a Tunix GRPO run into a standalone bench JobSet of the \
trainer program, and checks and compares what goes into it: render-bench, diff-renders, \
diff-configs, aot-check, aot-summarize, hlo-overlap, check-payload and bench-report.")
set(CPACK_PACKAGE_CONTACT "rl-trainer-bench maintainers <maintainers@users.noreply.a-seed-a7aaac5d.example>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # rl-trainer-bench_<version>_<arch>.deb
# Depends: computed by dpkg-shlibdeps (dpkg-dev) from the shared libraries the tools link, as a
# Debian package's own build would: libc6 with RTB_STATIC_DEPS (the default), and yaml-cpp,
# libyaml, fmt, spdlog, zlib, Nettle and libstdc++ too without it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# aot-check --run and the bench driver's preflight need python3; the tools themselves do not.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, bash-completion")
set(CPACK_STRIP_FILES ON)
include(CPack)

# The package test (tests/cli/package_test.py) runs cpack into a scratch directory.
if(TEST cli_package_test)
  set_property(TEST cli_package_test APPEND PROPERTY ENVIRONMENT
               "RTB_CPACK=${CMAKE_CPACK_COMMAND};RTB_BUILD_DIR=${CMAKE_BINARY_DIR};RTB_MAN_PAGES=$<BOOL:${RTB_MAN_PAGES}>")
endif()
if(TEST cli_install_test)
  set_property(TEST cli_install_test APPEND PROPERTY ENVIRONMENT
               "RTB_CMAKE=${CMAKE_COMMAND};RTB_BUILD_DIR=${CMAKE_BINARY_DIR};RTB_MAN_PAGES=$<BOOL:${RTB_MAN_PAGES}>")
endif()
