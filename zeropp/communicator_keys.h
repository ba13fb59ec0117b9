// communicator_keys.h: what the Communicator's source files share (internal to :comm; not part of
// the public face): the store key under which a group rank publishes its progress, and where
// point-to-point operations are numbered.
#ifndef ZEROPP_COMMUNICATOR_KEYS_H_
#define ZEROPP_COMMUNICATOR_KEYS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace comm_internal {

// The group's store key holding the last collective sequence number `group_rank` entered.
inline std::string ProgressKey(int group_rank) { return absl::StrCat("progress/", group_rank); }

// Point-to-point operations are numbered apart from collectives: ranks issue different p2p
// sequences, while collective numbers must agree across the group.
constexpr uint64_t kP2PSeqBase = uint64_t{1} << 40;

}  // namespace comm_internal
}  // namespace zeropp

#endif  // ZEROPP_COMMUNICATOR_KEYS_H_
