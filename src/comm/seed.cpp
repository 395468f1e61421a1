#include "strider/comm/seed.hpp"

#include <random>

#include "strider/core/log.hpp"

namespace strider {

std::int64_t draw_random_seed() {
  std::random_device device;
  const std::uint64_t high = device(), low = device();
  return static_cast<std::int64_t>((high << 32) ^ low);
}

std::int64_t agree_on_seed(const Communicator& comm, std::optional<std::int64_t> seed) {
  std::int64_t agreed = 0;
  if (comm.is_root()) {
    if (seed) {
      agreed = *seed;
    } else {
      agreed = draw_random_seed();
      log_info("seed ", agreed, " drawn from std::random_device; pass --seed ", agreed, " to repeat this run");
    }
  }
  comm.broadcast(&agreed, 1, 0);
  return agreed;
}

}  // namespace strider
