// doctor/network_rows.cpp: reading the RDMA devices, the verbs library, NCCL's plugin and settings, and the rules
// that say which transport NCCL would use between nodes.
#include "doctor/network_rows.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/log.h"

namespace rn50::doctor {
namespace {

constexpr const char* kRdmaClass = "/sys/class/infiniband";
// Where the image looks for a network plugin (the Dockerfile puts it on LD_LIBRARY_PATH): named in the advice.
constexpr const char* kImagePluginFolder = "/opt/rn50/nccl-plugin";
// The system's library folders the loader searches after LD_LIBRARY_PATH and ld.so.conf (Debian's and Ubuntu's
// multiarch folders first).
constexpr const char* kSystemLibraryFolders[] = {"/lib/x86_64-linux-gnu",
                                                 "/usr/lib/x86_64-linux-gnu",
                                                 "/lib/aarch64-linux-gnu",
                                                 "/usr/lib/aarch64-linux-gnu",
                                                 "/lib64",
                                                 "/usr/lib64",
                                                 "/lib",
                                                 "/usr/lib"};

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A file name against a glob of one "*" at most ("*.conf").
bool matches_glob(const std::string& name, const std::string& glob) {
  const size_t star = glob.find('*');
  if (star == std::string::npos) return name == glob;
  const std::string prefix = glob.substr(0, star), suffix = glob.substr(star + 1);
  return name.size() >= prefix.size() + suffix.size() && starts_with(name, prefix) && ends_with(name, suffix);
}

// Whether NCCL's list syntax selects `name` (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): items separated by commas, each a
// prefix of the name, or the whole name after a leading "="; a leading "^" selects all but the items. ":port" after
// an item (NCCL_IB_HCA's) is ignored here.
bool selected_by(const std::string& list, const std::string& name) {
  std::string items = list;
  const bool exclude = starts_with(items, "^");
  if (exclude) items = items.substr(1);
  const bool exact = starts_with(items, "=");
  if (exact) items = items.substr(1);
  for (std::string item : split(items, ',')) {
    item = item.substr(0, item.find(':'));
    if (item.empty()) continue;
    if (exact ? name == item : starts_with(name, item)) return !exclude;
  }
  return exclude;
}

// Checks an NCCL list variable against what the host has: a one-line problem where it selects none of them.
void check_list(const std::string& variable, const std::string& value, const std::vector<std::string>& names,
                const std::string& consequence, std::vector<std::string>& problems) {
  if (names.empty() || starts_with(value, "^")) return;  // nothing to check against; an exclusion keeps the rest
  for (const std::string& name : names)
    if (selected_by(value, name)) return;
  problems.push_back(variable + "=" + value + " selects none of " + join(names, ", ") + " here: " + consequence);
}

RdmaPort read_port(const HostView& host, const std::string& folder, int number) {
  RdmaPort port;
  port.number = number;
  // "4: ACTIVE": the number is the verbs enum, the word what it means.
  const std::string state = trim(host.read_text(folder + "/state").value_or(""));
  const size_t colon = state.find(':');
  port.state_text = colon == std::string::npos ? state : trim(state.substr(colon + 1));
  if (port.state_text.empty()) port.state_text = "unknown";
  port.state = port.state_text == "ACTIVE" ? PortState::kActive : PortState::kInactive;
  const std::string link = trim(host.read_text(folder + "/link_layer").value_or(""));
  port.link = link == "InfiniBand" ? LinkLayer::kInfiniBand
              : link == "Ethernet" ? LinkLayer::kEthernet
                                   : LinkLayer::kOther;
  port.gbps = parse_rate_gbps(host.read_text(folder + "/rate").value_or(""));
  return port;
}

// The verbs provider library of a kernel driver (ibverbs-providers), which libibverbs loads for its devices.
std::string provider_of(const std::string& driver) {
  if (driver == "mlx5_core") return "libmlx5.so.1";
  if (driver == "mlx4_core") return "libmlx4.so.1";
  if (driver == "efa") return "libefa.so.1";
  return "";
}

// The folders one ld.so.conf file names, following its include lines (DIR/GLOB, as /etc/ld.so.conf.d/*.conf) `depth`
// levels down.
void ld_conf_folders(const HostView& host, const std::string& file, int depth, std::vector<std::string>& folders) {
  const auto text = host.read_text(file);
  if (!text) return;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    if (!starts_with(line, "include")) {
      folders.push_back(line);
      continue;
    }
    if (depth == 0) continue;
    const std::string pattern = trim(line.substr(7));
    for (const std::string& entry : host.entries(folder_of(pattern)))
      if (matches_glob(entry, base_name(pattern)))
        ld_conf_folders(host, folder_of(pattern) + "/" + entry, depth - 1, folders);
  }
}

// The loader's search folders in its order: LD_LIBRARY_PATH, ld.so.conf's (its cache's), the system's.
std::vector<std::string> loader_folders(const HostView& host) {
  std::vector<std::string> folders;
  for (const std::string& entry : split(host.variable("LD_LIBRARY_PATH").value_or(""), ':'))
    if (!entry.empty()) folders.push_back(entry);
  ld_conf_folders(host, "/etc/ld.so.conf", 2, folders);
  for (const char* folder : kSystemLibraryFolders) folders.emplace_back(folder);
  std::vector<std::string> unique;
  for (const std::string& folder : folders)
    if (std::find(unique.begin(), unique.end(), folder) == unique.end()) unique.push_back(folder);
  return unique;
}

// NCCL's plugin search (NCCL_NET_PLUGIN: unset, libnccl-net.so; a name, that name and libnccl-net-NAME.so; "none",
// no plugin) along the loader's folders; the other libnccl-net*.so files seen, for the advice.
void find_plugin(const HostView& host, const std::optional<std::string>& chosen, NetworkFacts& facts) {
  if (chosen && lower(*chosen) == "none") return;
  if (chosen && !chosen->empty()) {
    facts.plugins_looked_for = {*chosen, "libnccl-net-" + *chosen + ".so"};
  } else {
    facts.plugins_looked_for = {"libnccl-net.so"};
  }
  if (chosen && chosen->find('/') != std::string::npos && host.exists(*chosen)) facts.plugin = *chosen;
  std::set<std::string> others;
  for (const std::string& folder : loader_folders(host)) {
    for (const std::string& name : host.entries(folder)) {
      if (!starts_with(name, "libnccl-net")) continue;
      const bool wanted = std::find(facts.plugins_looked_for.begin(), facts.plugins_looked_for.end(), name) !=
                          facts.plugins_looked_for.end();
      if (wanted && facts.plugin.empty()) facts.plugin = folder + "/" + name;
      if (!wanted) others.insert(name);
    }
  }
  facts.other_plugins.assign(others.begin(), others.end());
}

std::string describe_port(const RdmaDevice& device, const RdmaPort& port) {
  std::string text = strprintf("%s port %d %s", device.name.c_str(), port.number, lower(port.state_text).c_str());
  if (port.gbps > 0) text += strprintf(", %.3g Gb/s", port.gbps);
  return text;
}

const char* link_name(LinkLayer link) { return link == LinkLayer::kInfiniBand ? "InfiniBand" : "RoCE"; }

// What NCCL's own InfiniBand transport would find: the best active port (InfiniBand before RoCE) of the devices
// NCCL_IB_HCA selects, and what keeps it from being used ("" where nothing does).
struct VerbsView {
  const RdmaDevice* device = nullptr;  // of the best port, or the first device where no port is active
  const RdmaPort* port = nullptr;
  int active_ports = 0;
  int present = 0;  // verbs devices on the host
  int devices = 0;  // ... that NCCL_IB_HCA leaves to NCCL
  std::string blocked;
};

VerbsView verbs_view(const NetworkFacts& f) {
  VerbsView v;
  const std::string& hca_list = f.nccl.ib_hca;
  std::vector<std::string> inactive;
  for (const RdmaDevice& device : f.devices) {
    if (device.kind != RdmaKind::kVerbs) continue;
    ++v.present;
    if (!v.device) v.device = &device;
    if (!hca_list.empty() && !selected_by(hca_list, device.name)) continue;
    if (v.devices++ == 0) v.device = &device;
    if (!v.device) v.device = &device;
    for (const RdmaPort& port : device.ports) {
      const bool usable = port.state == PortState::kActive && port.link != LinkLayer::kOther;
      if (!usable) {
        inactive.push_back(strprintf("%s port %d: %s", device.name.c_str(), port.number, port.state_text.c_str()));
        continue;
      }
      ++v.active_ports;
      const bool better = !v.port || (port.link == LinkLayer::kInfiniBand && v.port->link != LinkLayer::kInfiniBand);
      if (better) v.device = &device, v.port = &port;
    }
  }
  if (v.present == 0) {
    v.blocked = "no InfiniBand or RoCE device";
  } else if (v.devices == 0) {
    v.blocked = "NCCL_IB_HCA=" + hca_list + " selects none of them";
  } else if (f.nccl.ib_disabled) {
    v.blocked = "NCCL_IB_DISABLE turns InfiniBand off";
  } else if (!v.port) {
    v.blocked = "no port is active (" + join(inactive, "; ") + ")";
    // An InfiniBand port with its link up waits in INIT until a subnet manager configures it.
    if (std::any_of(inactive.begin(), inactive.end(), [](const std::string& s) { return ends_with(s, ": INIT"); }))
      v.blocked += ": INIT waits for a subnet manager (opensm, or the switch's)";
  } else if (f.uverbs == 0) {
    v.blocked = "/dev/infiniband has no uverbs device (a container needs --device /dev/infiniband)";
  } else if (!f.verbs.opened) {
    v.blocked = "libibverbs.so.1 cannot be loaded (" + f.verbs.why_not + "; install libibverbs1 and ibverbs-providers)";
  } else if (!f.providers_missing.empty()) {
    v.blocked =
        "the verbs provider " + join(f.providers_missing, ", ") + " cannot be loaded (install ibverbs-providers)";
  }
  return v;
}

// "InfiniBand (mlx5_0 port 1 active, 400 Gb/s; 8 active ports on 8 devices)".
std::string describe_verbs(const VerbsView& v) {
  std::string text = std::string(link_name(v.port->link)) + " (" + describe_port(*v.device, *v.port);
  if (v.active_ports > 1) text += strprintf("; %d active ports on %d devices", v.active_ports, v.devices);
  return text + ")";
}

// What keeps the EFA devices from the plugin's libfabric: the same device files and verbs library ("" where nothing).
std::string efa_blocked(const NetworkFacts& f) {
  if (f.uverbs == 0) return "/dev/infiniband has no uverbs device (a container needs --device /dev/infiniband)";
  if (!f.verbs.opened) return "libibverbs.so.1 cannot be loaded (" + f.verbs.why_not + ")";
  if (!f.providers_missing.empty())
    return "the verbs provider " + join(f.providers_missing, ", ") + " cannot be loaded";
  return "";
}

constexpr const char* kSocketsSlow = "TCP sockets, fine for one node, slow across nodes";

// What the host offers NCCL, worked out once for the row's rules.
struct Offer {
  VerbsView verbs;
  bool ib_ready = false;    // NCCL's own InfiniBand transport would run
  int efa = 0;              // EFA devices
  std::string plugin;       // "the NCCL network plugin PATH", "" without one
  std::string efa_devices;  // "AWS EFA (4 devices)"
  std::string efa_blocked;  // what keeps EFA from the plugin, "" where nothing
};

Offer offer_of(const NetworkFacts& f) {
  Offer o;
  o.verbs = verbs_view(f);
  o.ib_ready = o.verbs.blocked.empty();
  o.efa = static_cast<int>(
      std::count_if(f.devices.begin(), f.devices.end(), [](const RdmaDevice& d) { return d.kind == RdmaKind::kEfa; }));
  o.plugin = f.plugin.empty() ? "" : "the NCCL network plugin " + f.plugin;
  o.efa_devices = strprintf("AWS EFA (%d device%s)", o.efa, o.efa == 1 ? "" : "s");
  o.efa_blocked = efa_blocked(f);
  return o;
}

// NCCL_NET names the network: NCCL uses it or fails.
void forced_network(const NetworkFacts& f, const Offer& o, ReportRow& row) {
  if (f.nccl.net == NetChoice::kSocket) {
    const bool wasted = o.ib_ready || (o.efa > 0 && !o.plugin.empty() && o.efa_blocked.empty());
    row.verdict = wasted ? "warn" : "info";
    row.note =
        "NCCL_NET=Socket: " +
        (wasted ? "TCP sockets although " + (o.ib_ready ? describe_verbs(o.verbs) : o.efa_devices) + " could be used"
                : std::string(kSocketsSlow));
  } else if (f.nccl.net == NetChoice::kIb) {
    if (o.ib_ready) {
      row.value = link_name(o.verbs.port->link);
      row.verdict = "ok";
      row.note = describe_verbs(o.verbs) + ": fast (NCCL_NET=IB)";
    } else {
      row.value = "none";
      row.verdict = "bad";
      row.note = "NCCL_NET=IB, but " + o.verbs.blocked + ": NCCL fails to start";
    }
  } else if (f.plugin.empty()) {
    row.value = "none";
    row.verdict = "bad";
    row.note = "NCCL_NET=" + f.nccl.net_name + " is neither IB nor Socket, and no network plugin (" +
               join(f.plugins_looked_for, ", ") + ") is on the loader's path: NCCL fails to start";
  } else {
    row.value = "network plugin";
    const bool efa = o.efa > 0 && o.efa_blocked.empty();
    row.verdict = efa ? "ok" : "info";
    row.note = "NCCL_NET=" + f.nccl.net_name + ": " + o.plugin + (efa ? ", over " + o.efa_devices + ": fast" : "");
  }
}

// EFA devices that no plugin serves: why, and what to do.
std::string efa_without_plugin(const NetworkFacts& f, const Offer& o) {
  const bool off = f.nccl.plugin && lower(*f.nccl.plugin) == "none";
  std::string note = o.efa_devices + " but " +
                     (off ? std::string("NCCL_NET_PLUGIN=none turns network plugins off")
                          : "no NCCL network plugin (" + join(f.plugins_looked_for, ", ") + " on the loader's path)") +
                     ": NCCL would fall back to TCP sockets; put aws-ofi-nccl's libnccl-net.so in " +
                     kImagePluginFolder;
  for (const std::string& other : f.other_plugins) {
    if (starts_with(other, "libnccl-net-") && ends_with(other, ".so")) {
      const std::string name = other.substr(12, other.size() - 12 - 3);
      return note + "; " + other + " is there: NCCL_NET_PLUGIN=" + name + " loads it";
    }
  }
  return note;
}

ReportRow transport_row(const NetworkFacts& f) {
  ReportRow row{"network", "NCCL across nodes", "TCP sockets", "info", ""};
  if (!f.gpu_build) {
    row.value = "Gloo over TCP";
    row.note = "a CPU-only build: NCCL and RDMA devices are for GPU builds";
    return row;
  }
  const Offer o = offer_of(f);
  if (f.nccl.net != NetChoice::kAny) {
    forced_network(f, o, row);
  } else if (!o.plugin.empty() && o.efa > 0) {
    row.value = "AWS EFA (plugin)";
    row.verdict = o.efa_blocked.empty() ? "ok" : "warn";
    row.note = o.efa_blocked.empty() ? o.efa_devices + " through " + o.plugin + ": fast"
                                     : o.efa_devices + " and " + o.plugin + ", but " + o.efa_blocked +
                                           ": NCCL would fall back to TCP sockets";
  } else if (o.ib_ready) {
    row.value = link_name(o.verbs.port->link);
    row.verdict = "ok";
    row.note = describe_verbs(o.verbs) + ": fast" + (o.plugin.empty() ? "" : " (" + o.plugin + " is tried first)");
  } else if (o.efa > 0) {
    row.verdict = "warn";
    row.note = efa_without_plugin(f, o);
  } else if (o.verbs.present > 0) {
    const bool roce = !o.verbs.device->ports.empty() && o.verbs.device->ports.front().link == LinkLayer::kEthernet;
    row.verdict = "warn";
    row.note = std::string(roce ? "RoCE" : "InfiniBand") + " device " + o.verbs.device->name +
               (o.verbs.present > 1 ? strprintf(" (of %d)", o.verbs.present) : "") + ", but " + o.verbs.blocked +
               ": NCCL would fall back to TCP sockets";
  } else {
    row.note =
        (o.plugin.empty() ? std::string("no RDMA device: ") : o.plugin + " finds no RDMA device here: ") + kSocketsSlow;
  }
  return row;
}

}  // namespace

double parse_rate_gbps(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return 0;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(s.c_str(), &end);
  if (errno != 0 || !starts_with(trim(end), "Gb/sec") || value <= 0) return 0;
  return value;
}

NcclSettings read_nccl_settings(const HostView& host, const std::vector<RdmaDevice>& devices) {
  NcclSettings nccl;
  for (const char* name : {"NCCL_NET", "NCCL_IB_DISABLE", "NCCL_NET_PLUGIN", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"}) {
    const auto value = host.variable(name);
    if (value) nccl.set.push_back(std::string(name) + "=" + *value);
  }
  const std::string net = host.variable("NCCL_NET").value_or("");
  nccl.net_name = net;
  nccl.net = net.empty()              ? NetChoice::kAny
             : lower(net) == "ib"     ? NetChoice::kIb
             : lower(net) == "socket" ? NetChoice::kSocket
                                      : NetChoice::kPlugin;
  if (const auto disable = host.variable("NCCL_IB_DISABLE"); disable && !disable->empty()) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(disable->c_str(), &end, 10);
    if (errno != 0 || *end != '\0') {
      nccl.problems.push_back("NCCL_IB_DISABLE=" + *disable + " is not a number: 1 turns InfiniBand off, 0 keeps it");
    } else {
      nccl.ib_disabled = value != 0;
    }
  }
  nccl.plugin = host.variable("NCCL_NET_PLUGIN");
  if (const auto ifname = host.variable("NCCL_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    check_list("NCCL_SOCKET_IFNAME", *ifname, host.entries("/sys/class/net"),
               "NCCL finds no socket interface and fails to start", nccl.problems);
  }
  nccl.ib_hca = host.variable("NCCL_IB_HCA").value_or("");
  if (!nccl.ib_hca.empty()) {
    std::vector<std::string> names;
    for (const RdmaDevice& device : devices)
      if (device.kind == RdmaKind::kVerbs) names.push_back(device.name);
    check_list("NCCL_IB_HCA", nccl.ib_hca, names, "NCCL's InfiniBand transport finds no device", nccl.problems);
  }
  return nccl;
}

NetworkFacts read_network_facts(const HostView& host, bool gpu_build) {
  NetworkFacts facts;
  facts.gpu_build = gpu_build;
  for (const std::string& name : host.entries(kRdmaClass)) {
    RdmaDevice device;
    device.name = name;
    const std::string folder = std::string(kRdmaClass) + "/" + name;
    if (const auto driver = host.link_target(folder + "/device/driver")) device.driver = base_name(*driver);
    device.kind = device.driver == "efa" || (device.driver.empty() && starts_with(name, "efa")) ? RdmaKind::kEfa
                                                                                                : RdmaKind::kVerbs;
    for (const std::string& port : host.entries(folder + "/ports")) {
      const bool number =
          !port.empty() && std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
      if (number && port.size() < 4)
        device.ports.push_back(read_port(host, folder + "/ports/" + port, std::stoi(port)));
    }
    facts.devices.push_back(device);
  }
  for (const std::string& name : host.entries("/dev/infiniband")) facts.uverbs += starts_with(name, "uverbs");
  facts.verbs = host.open_library("libibverbs.so.1");
  if (facts.verbs.opened) {
    std::set<std::string> providers;
    for (const RdmaDevice& device : facts.devices)
      if (!provider_of(device.driver).empty()) providers.insert(provider_of(device.driver));
    for (const std::string& provider : providers) {
      const LibraryOpen opened = host.open_library(provider);
      if (!opened.opened) facts.providers_missing.push_back(provider);
    }
  }
  facts.nccl = read_nccl_settings(host, facts.devices);
  find_plugin(host, facts.nccl.plugin, facts);
  return facts;
}

std::vector<ReportRow> network_rows(const NetworkFacts& facts) {
  std::vector<ReportRow> rows{transport_row(facts)};
  if (!facts.nccl.set.empty()) {
    rows.push_back({"network", "NCCL network settings", join(facts.nccl.set, " "),
                    facts.nccl.problems.empty() ? "info" : "warn",
                    facts.nccl.problems.empty() ? "NCCL reads these as it starts" : join(facts.nccl.problems, "; ")});
  }
  return rows;
}

}  // namespace rn50::doctor
