#pragma once

#include <cstddef>
#include <type_traits>

namespace rtb {

// The name of an enumerator, read from its enum's names listed in declaration order:
//
//   std::string_view role_name(Role role) {
//     return enum_name<Role::kUnknown>(role, {"trainer", "orchestrator", "rollout", "unknown"});
//   }
//
// One form for every `..._name()` of the library, where a switch of six lines per enum said the
// same thing each time. `kLast` is the enum's last enumerator: a list with a name too few or too
// many does not compile. (The enums it serves number their enumerators from 0 without gaps.) A
// value outside the enum, which only a cast can make, is named "?".
template <auto kLast, std::size_t N>
constexpr const char* enum_name(decltype(kLast) value, const char* const (&names)[N]) {
  static_assert(std::is_enum_v<decltype(kLast)>, "kLast names an enumerator");
  static_assert(N == static_cast<std::size_t>(kLast) + 1, "one name per enumerator, in order");
  const auto index = static_cast<std::size_t>(value);
  return index < N ? names[index] : "?";
}

}  // namespace rtb
