// doctor/network_rows.h: the doctor's network rows: which transport NCCL would use between nodes (InfiniBand, RoCE,
// AWS EFA through a network plugin, or TCP sockets), read from the RDMA devices, the verbs library, the plugin on the
// loader's path and the NCCL_* environment, with a verdict for multi-node runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "doctor/host_view.h"
#include "doctor/rows.h"

namespace rn50::doctor {

// A port's link layer (sysfs link_layer): InfiniBand, or Ethernet, which is RoCE; EFA's reads "Unknown".
enum class LinkLayer { kInfiniBand, kEthernet, kOther };
// A port's state (sysfs state, "4: ACTIVE"): NCCL uses active ports only.
enum class PortState { kActive, kInactive };

struct RdmaPort {
  int number = 1;
  PortState state = PortState::kInactive;
  std::string state_text;  // "DOWN", "INIT", "ACTIVE" as sysfs says it
  LinkLayer link = LinkLayer::kOther;
  double gbps = 0;  // from sysfs rate ("400 Gb/sec (4X NDR)"); 0 where unknown
};

// NCCL's own InfiniBand transport drives verbs devices (mlx5 and the like) itself; AWS EFA needs a network plugin
// (aws-ofi-nccl) and is never used without one.
enum class RdmaKind { kVerbs, kEfa };

struct RdmaDevice {
  std::string name;    // mlx5_0, rdmap16s27
  std::string driver;  // the kernel driver (mlx5_core, efa), "" where unknown
  RdmaKind kind = RdmaKind::kVerbs;
  std::vector<RdmaPort> ports;
};

// NCCL_NET: which network NCCL must use; any other name is a plugin's network ("AWS Libfabric", "OFI").
enum class NetChoice { kAny, kIb, kSocket, kPlugin };

struct NcclSettings {
  NetChoice net = NetChoice::kAny;
  std::string net_name;               // NCCL_NET as given
  bool ib_disabled = false;           // NCCL_IB_DISABLE set to a number other than 0
  std::optional<std::string> plugin;  // NCCL_NET_PLUGIN as given; "none" disables plugins
  std::string ib_hca;                 // NCCL_IB_HCA: the verbs devices NCCL may use ("" all)
  std::vector<std::string> set;       // "NAME=value" of every NCCL_* network variable set, for the settings row
  std::vector<std::string> problems;  // one line each: a value NCCL cannot use
};

struct NetworkFacts {
  bool gpu_build = true;  // NCCL between GPUs; a CPU-only build runs Gloo over TCP
  std::vector<RdmaDevice> devices;
  int uverbs = 0;     // /dev/infiniband/uverbs* (a container sees none without --device)
  LibraryOpen verbs;  // libibverbs.so.1
  std::vector<std::string>
      providers_missing;  // verbs providers of the devices' drivers that do not load: "libmlx5.so.1 (...)"
  std::string plugin;     // the network plugin NCCL would load, "" where none
  std::vector<std::string> plugins_looked_for;  // the names NCCL tries
  std::vector<std::string> other_plugins;       // libnccl-net-*.so files NCCL would not load as things are
  NcclSettings nccl;
};

// Reads the RDMA devices (/sys/class/infiniband/*/ports/*/{state,link_layer,rate}, device/driver), /dev/infiniband,
// the verbs library and the providers of the devices' drivers (dlopen), the plugin on the loader's path
// (LD_LIBRARY_PATH, /etc/ld.so.conf and its .d folder, the system's library folders) and the NCCL_* environment.
NetworkFacts read_network_facts(const HostView& host, bool gpu_build);

// The NCCL_* variables that choose the network, checked against the interfaces in /sys/class/net and the devices.
NcclSettings read_nccl_settings(const HostView& host, const std::vector<RdmaDevice>& devices);

// Section "network": "NCCL across nodes" (the transport: ok where fast, warn where RDMA hardware is there but NCCL
// would not use it, info with no RDMA device, bad where NCCL would fail to start) and, where any NCCL_* network
// variable is set, "NCCL network settings" (warn on a value NCCL cannot use).
std::vector<ReportRow> network_rows(const NetworkFacts& facts);

// "400 Gb/sec (4X NDR)" -> 400; 0 for text without a rate.
double parse_rate_gbps(const std::string& text);

}  // namespace rn50::doctor
