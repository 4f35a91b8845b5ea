#include "rpcie/result.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <rdma/fi_errno.h>

namespace rpcie {

int fabric_code_to_errno(int fi_code) noexcept {
  if (fi_code < 0) fi_code = -fi_code;
  if (fi_code < FI_ERRNO_OFFSET) return fi_code == 0 ? EIO : fi_code;  // libfabric reuses errno below 256
  switch (fi_code) {
    case FI_ETOOSMALL:
      return ENOBUFS;
    case FI_EOPBADSTATE:
      return EBADFD;
    case FI_EBADFLAGS:
      return EINVAL;
    case FI_ENOEQ:
    case FI_ENOCQ:
    case FI_ENOAV:
    case FI_EDOMAIN:
      return EINVAL;
    case FI_ETRUNC:
      return EMSGSIZE;
    case FI_ENOKEY:
      return ENOKEY;
    case FI_EOVERRUN:
      return EOVERFLOW;
    case FI_ENORX:
      return ENOBUFS;
    case FI_ECRC:
    case FI_EAVAIL:
    case FI_EOTHER:
    default:
      return EIO;
  }
}

int Error::to_errno() const noexcept {
  return domain == ErrorDomain::fabric ? fabric_code_to_errno(code) : (code > 0 ? code : EIO);
}

std::string Error::describe() const {
  std::string reason = domain == ErrorDomain::fabric ? fi_strerror(code) : std::strerror(to_errno());
  return message.empty() ? reason : message + ": " + reason;
}

tl::unexpected<Error> fail_fabric(long rc, std::string_view what) {
  int code = static_cast<int>(rc < 0 ? -rc : rc);
  return tl::unexpected<Error>(Error{ErrorDomain::fabric, code, std::string(what)});
}

}  // namespace rpcie
