// fmt's compiled functions, defined in the tidepool front end itself (see CMakeLists.txt: it links
// no shared library but the C library, for a fast start). The objects it links call these five
// out-of-line functions of the fmt library; compiled here from fmt's own headers in header-only
// mode, they are odr-used below so that this object defines them and libfmt.so is not needed. A
// new one shows up as an undefined reference when the front end is linked.
#define FMT_HEADER_ONLY
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace tidepool {

extern void* const kFmtFunctions[];
void* const kFmtFunctions[] = {
    reinterpret_cast<void*>(
        static_cast<std::string (*)(fmt::string_view, fmt::format_args)>(&fmt::vformat)),
    reinterpret_cast<void*>(
        static_cast<void (*)(fmt::string_view, fmt::format_args)>(&fmt::vprint)),
    reinterpret_cast<void*>(
        static_cast<void (*)(std::FILE*, fmt::string_view, fmt::format_args)>(&fmt::vprint)),
    reinterpret_cast<void*>(static_cast<bool (*)(std::uint32_t)>(&fmt::detail::is_printable)),
    reinterpret_cast<void*>(static_cast<void (*)(const char*)>(&fmt::detail::throw_format_error)),
};

}  // namespace tidepool
