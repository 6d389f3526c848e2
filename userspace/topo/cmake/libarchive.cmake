# gdrpeer_libarchive: libarchive and the compression libraries its tar reader and writer use
# here (gzip: zlib, xz: liblzma, zstd: libzstd, bzip2: libbz2). Static when every .a is there
# (GDRPEER_STATIC_LIBARCHIVE, default ON): the gdrpeer binary then needs only libc on a node, as
# before libarchive. Otherwise the shared libraries (libarchive13 becomes a runtime dependency).
option(GDRPEER_STATIC_LIBARCHIVE "Link libarchive and its compression libraries statically when their .a files exist" ON)
add_library(gdrpeer_libarchive INTERFACE)
set(_gdrpeer_archive_static_libs archive zstd lzma bz2 z)
set(_gdrpeer_archive_static "")
if(GDRPEER_STATIC_LIBARCHIVE)
  foreach(lib IN LISTS _gdrpeer_archive_static_libs)
    find_library(GDRPEER_STATIC_${lib} NAMES lib${lib}.a)
    if(NOT GDRPEER_STATIC_${lib})
      message(STATUS "libarchive: no lib${lib}.a, linking the shared libraries")
      set(_gdrpeer_archive_static "")
      break()
    endif()
    list(APPEND _gdrpeer_archive_static ${GDRPEER_STATIC_${lib}})
  endforeach()
endif()
find_path(GDRPEER_ARCHIVE_INCLUDE archive.h REQUIRED)
target_include_directories(gdrpeer_libarchive INTERFACE ${GDRPEER_ARCHIVE_INCLUDE})
if(_gdrpeer_archive_static)
  message(STATUS "libarchive: static (${_gdrpeer_archive_static})")
  target_link_libraries(gdrpeer_libarchive INTERFACE ${_gdrpeer_archive_static})
  # Writing GNU tar takes archive_write_set_format.o (for one helper), whose table of every
  # writer names the xar, zip and mtree writers and through them libxml2, nettle and ICU.
  # Debian's libarchive.a has a section per function: unused sections are dropped, and with
  # them those references (the CLI links this way anyway; here for every program with the
  # topology library).
  target_link_options(gdrpeer_libarchive INTERFACE -Wl,--gc-sections)
  set(GDRPEER_LIBARCHIVE_LINKAGE "static" CACHE INTERNAL "")
else()
  find_package(LibArchive REQUIRED)
  target_link_libraries(gdrpeer_libarchive INTERFACE LibArchive::LibArchive)
  set(GDRPEER_LIBARCHIVE_LINKAGE "shared" CACHE INTERNAL "")
endif()
