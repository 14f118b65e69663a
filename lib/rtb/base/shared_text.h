// Text that is cheap to copy: either a view of text that lives as long as the program (a file the
// build embeds in the binary), or a string shared by every copy. RenderOptions carries the bench
// driver (280 KB) and its packed form (110 KB) this way: copying them into the options of every
// render cost two large allocations in fresh pages, a tenth of a render's page faults (issue 29).
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace rtb {

class SharedText {
 public:
  SharedText() = default;
  // Holds `text`; copies of this SharedText share it.
  SharedText(std::string text)  // NOLINT(google-explicit-constructor): a string is a text
      : owned_(std::make_shared<const std::string>(std::move(text))), view_(*owned_) {}
  SharedText(const char* text)  // NOLINT(google-explicit-constructor)
      : SharedText(std::string(text)) {}
  // A view of `text`, which must outlive every copy (static storage: embedded files).
  static SharedText of_static(std::string_view text) {
    SharedText shared;
    shared.view_ = text;
    return shared;
  }

  std::string_view view() const { return view_; }
  operator std::string_view() const { return view_; }  // NOLINT(google-explicit-constructor)
  bool empty() const { return view_.empty(); }
  std::size_t size() const { return view_.size(); }

  friend bool operator==(const SharedText& a, std::string_view b) { return a.view_ == b; }
  friend std::ostream& operator<<(std::ostream& out, const SharedText& text) {
    return out << text.view_;
  }

 private:
  // The string when held (the view points into it: a shared string never moves), else null.
  std::shared_ptr<const std::string> owned_;
  std::string_view view_;
};

}  // namespace rtb
