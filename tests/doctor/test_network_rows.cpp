// tests/doctor/test_network_rows.cpp: the network rows on fake trees standing in for /sys, /dev and the library
// folders: InfiniBand and RoCE that NCCL would use or would not (and why), AWS EFA with and without a network plugin,
// no RDMA device, and the NCCL_* settings that force a choice or that NCCL cannot use.
#include <gtest/gtest.h>

#include <string>

#include "doctor/network_rows.h"
#include "tests/doctor/fake_host.h"

namespace rn50::doctor {
namespace {

using testing::FakeHost;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One RDMA device as sysfs shows it: its driver's link and each port's state, link layer and rate.
void rdma_device(const FakeHost& host, const std::string& name, const std::string& driver) {
  host.link("/sys/class/infiniband/" + name + "/device/driver", "../../../../bus/pci/drivers/" + driver);
}
void rdma_port(const FakeHost& host, const std::string& device, int port, const std::string& state,
               const std::string& link, const std::string& rate) {
  const std::string folder = "/sys/class/infiniband/" + device + "/ports/" + std::to_string(port);
  host.write(folder + "/state", state + "\n");
  host.write(folder + "/link_layer", link + "\n");
  host.write(folder + "/rate", rate + "\n");
}

// An InfiniBand machine whose NCCL would use mlx5_0: the device files, the verbs library and its mlx5 provider.
void infiniband_host(FakeHost& host, const std::string& link = "InfiniBand") {
  rdma_device(host, "mlx5_0", "mlx5_core");
  rdma_port(host, "mlx5_0", 1, "4: ACTIVE", link, "400 Gb/sec (4X NDR)");
  host.write("/dev/infiniband/uverbs0", "");
  host.write("/dev/infiniband/rdma_cm", "");
  host.libraries["libibverbs.so.1"] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  host.libraries["libmlx5.so.1"] = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1";
}

// An AWS instance with two EFA devices (their ports' link layer reads "Unknown") and the verbs library.
void efa_host(FakeHost& host) {
  for (const std::string name : {"rdmap16s27", "rdmap32s27"}) {
    rdma_device(host, name, "efa");
    rdma_port(host, name, 1, "4: ACTIVE", "Unknown", "100 Gb/sec (4X EDR)");
  }
  host.write("/dev/infiniband/uverbs0", "");
  host.write("/dev/infiniband/uverbs1", "");
  host.libraries["libibverbs.so.1"] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  host.libraries["libefa.so.1"] = "/usr/lib/x86_64-linux-gnu/libefa.so.1";
}

std::vector<ReportRow> rows_of(const FakeHost& host, bool gpu_build = true) {
  return network_rows(read_network_facts(host, gpu_build));
}

ReportRow transport(const FakeHost& host) {
  const auto rows = rows_of(host);
  EXPECT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].section, "network");
  EXPECT_EQ(rows[0].check, "NCCL across nodes");
  return rows.empty() ? ReportRow{} : rows[0];
}

TEST(NetworkRows, ParsesSysfsRates) {
  EXPECT_EQ(parse_rate_gbps("400 Gb/sec (4X NDR)\n"), 400);
  EXPECT_EQ(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_EQ(parse_rate_gbps("100 Gb/sec"), 100);
  EXPECT_EQ(parse_rate_gbps(""), 0);
  EXPECT_EQ(parse_rate_gbps("fast"), 0);
  EXPECT_EQ(parse_rate_gbps("400 MB/s"), 0);
  EXPECT_EQ(parse_rate_gbps("-5 Gb/sec"), 0);
}

TEST(NetworkRows, ReadsTheDevicesAndPortsFromSysfs) {
  FakeHost host;
  infiniband_host(host);
  rdma_device(host, "mlx5_1", "mlx5_core");
  rdma_port(host, "mlx5_1", 1, "1: DOWN", "Ethernet", "25 Gb/sec (1X EDR)");
  host.make_folder("/sys/class/infiniband/mlx5_1/ports/lost+found");  // not a port
  efa_host(host);
  const NetworkFacts facts = read_network_facts(host, true);
  ASSERT_EQ(facts.devices.size(), 4u);
  const RdmaDevice& mlx = facts.devices[0];
  EXPECT_EQ(mlx.name, "mlx5_0");
  EXPECT_EQ(mlx.driver, "mlx5_core");
  EXPECT_EQ(mlx.kind, RdmaKind::kVerbs);
  ASSERT_EQ(mlx.ports.size(), 1u);
  EXPECT_EQ(mlx.ports[0].number, 1);
  EXPECT_EQ(mlx.ports[0].state, PortState::kActive);
  EXPECT_EQ(mlx.ports[0].link, LinkLayer::kInfiniBand);
  EXPECT_EQ(mlx.ports[0].gbps, 400);
  const RdmaDevice& down = facts.devices[1];
  ASSERT_EQ(down.ports.size(), 1u);
  EXPECT_EQ(down.ports[0].state, PortState::kInactive);
  EXPECT_EQ(down.ports[0].state_text, "DOWN");
  EXPECT_EQ(down.ports[0].link, LinkLayer::kEthernet);
  EXPECT_EQ(facts.devices[2].name, "rdmap16s27");
  EXPECT_EQ(facts.devices[2].kind, RdmaKind::kEfa);
  EXPECT_EQ(facts.devices[2].ports[0].link, LinkLayer::kOther);
  EXPECT_EQ(facts.uverbs, 2);  // uverbs0 and uverbs1; rdma_cm is no verbs device
  EXPECT_TRUE(facts.verbs.opened);
  EXPECT_TRUE(facts.providers_missing.empty());
  EXPECT_EQ(facts.plugins_looked_for, (std::vector<std::string>{"libnccl-net.so"}));
}

TEST(NetworkRows, InfiniBandWithAnActivePortIsFast) {
  FakeHost host;
  infiniband_host(host);
  const auto rows = rows_of(host);
  ASSERT_EQ(rows.size(), 1u);  // no NCCL_* variable set: no settings row
  EXPECT_EQ(rows[0].value, "InfiniBand");
  EXPECT_EQ(rows[0].verdict, "ok");
  EXPECT_EQ(rows[0].note, "InfiniBand (mlx5_0 port 1 active, 400 Gb/s): fast");
  // Eight rails: the count, and InfiniBand chosen before a RoCE port that sorts first.
  rdma_device(host, "mlx5_00", "mlx5_core");
  rdma_port(host, "mlx5_00", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
  for (int i = 1; i < 8; ++i) {
    rdma_device(host, "mlx5_" + std::to_string(i), "mlx5_core");
    rdma_port(host, "mlx5_" + std::to_string(i), 1, "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)");
  }
  EXPECT_EQ(transport(host).note, "InfiniBand (mlx5_0 port 1 active, 400 Gb/s; 9 active ports on 9 devices): fast");
}

TEST(NetworkRows, RoceIsFastToo) {
  FakeHost host;
  infiniband_host(host, "Ethernet");
  const ReportRow row = transport(host);
  EXPECT_EQ(row.value, "RoCE");
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note, "RoCE (mlx5_0 port 1 active, 400 Gb/s): fast");
}

TEST(NetworkRows, InfiniBandThatNcclWouldNotUseWarnsWithTheReason) {
  {
    FakeHost host;
    infiniband_host(host);
    rdma_port(host, "mlx5_0", 1, "1: DOWN", "InfiniBand", "10 Gb/sec (4X SDR)");
    const ReportRow row = transport(host);
    EXPECT_EQ(row.value, "TCP sockets");
    EXPECT_EQ(row.verdict, "warn");
    EXPECT_EQ(row.note,
              "InfiniBand device mlx5_0, but no port is active (mlx5_0 port 1: DOWN): NCCL would fall back to TCP "
              "sockets");
    rdma_port(host, "mlx5_0", 1, "2: INIT", "InfiniBand", "400 Gb/sec (4X NDR)");  // link up, no subnet manager
    EXPECT_EQ(transport(host).note,
              "InfiniBand device mlx5_0, but no port is active (mlx5_0 port 1: INIT): INIT waits for a subnet manager "
              "(opensm, or the switch's): NCCL would fall back to TCP sockets");
  }
  {
    FakeHost host;  // a container started without --device /dev/infiniband: sysfs shows the device all the same
    rdma_device(host, "mlx5_0", "mlx5_core");
    rdma_port(host, "mlx5_0", 1, "4: ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)");
    host.libraries["libibverbs.so.1"] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
    host.libraries["libmlx5.so.1"] = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1";
    const ReportRow row = transport(host);
    EXPECT_EQ(row.verdict, "warn");
    EXPECT_TRUE(has(row.note,
                    "but /dev/infiniband has no uverbs device (a container needs --device "
                    "/dev/infiniband): NCCL would fall back to TCP sockets"))
        << row.note;
  }
  {
    FakeHost host;  // the runtime stage without libibverbs1
    infiniband_host(host);
    host.libraries.clear();
    const ReportRow row = transport(host);
    EXPECT_EQ(row.verdict, "warn");
    EXPECT_TRUE(has(row.note,
                    "but libibverbs.so.1 cannot be loaded (libibverbs.so.1: cannot open shared object file; "
                    "install libibverbs1 and ibverbs-providers)"))
        << row.note;
  }
  {
    FakeHost host;  // libibverbs1 without ibverbs-providers
    infiniband_host(host);
    host.libraries.erase("libmlx5.so.1");
    const ReportRow row = transport(host);
    EXPECT_EQ(row.verdict, "warn");
    EXPECT_TRUE(has(row.note, "the verbs provider libmlx5.so.1 cannot be loaded (install ibverbs-providers)"))
        << row.note;
  }
}

TEST(NetworkRows, NcclIbDisableTurnsInfiniBandOff) {
  FakeHost host;
  infiniband_host(host);
  host.environment["NCCL_IB_DISABLE"] = "1";
  const auto rows = rows_of(host);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].verdict, "warn");
  EXPECT_TRUE(has(rows[0].note, "but NCCL_IB_DISABLE turns InfiniBand off: NCCL would fall back to TCP sockets"))
      << rows[0].note;
  EXPECT_EQ(rows[1].check, "NCCL network settings");
  EXPECT_EQ(rows[1].value, "NCCL_IB_DISABLE=1");
  EXPECT_EQ(rows[1].verdict, "info");
  host.environment["NCCL_IB_DISABLE"] = "0";
  EXPECT_EQ(transport(host).verdict, "ok");
}

TEST(NetworkRows, NoRdmaDeviceMeansTcpSockets) {
  FakeHost host;
  host.make_folder("/sys/class/net/eth0");
  const ReportRow row = transport(host);
  EXPECT_EQ(row.value, "TCP sockets");
  EXPECT_EQ(row.verdict, "info");
  EXPECT_EQ(row.note, "no RDMA device: TCP sockets, fine for one node, slow across nodes");
}

TEST(NetworkRows, ACpuOnlyBuildRunsGloo) {
  FakeHost host;
  infiniband_host(host);
  const auto rows = rows_of(host, false);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].value, "Gloo over TCP");
  EXPECT_EQ(rows[0].verdict, "info");
}

TEST(NetworkRows, EfaWithoutAPluginFallsBackToSockets) {
  FakeHost host;
  efa_host(host);
  const ReportRow row = transport(host);
  EXPECT_EQ(row.value, "TCP sockets");
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_EQ(row.note,
            "AWS EFA (2 devices) but no NCCL network plugin (libnccl-net.so on the loader's path): NCCL would fall "
            "back to TCP sockets; put aws-ofi-nccl's libnccl-net.so in /opt/rn50/nccl-plugin");
  // The EFA installer's own name, which NCCL loads only when told to.
  host.write("/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  host.environment["LD_LIBRARY_PATH"] = "/opt/amazon/ofi-nccl/lib";
  EXPECT_TRUE(has(transport(host).note, "; libnccl-net-ofi.so is there: NCCL_NET_PLUGIN=ofi loads it"))
      << transport(host).note;
  host.environment["NCCL_NET_PLUGIN"] = "ofi";
  const ReportRow told = transport(host);
  EXPECT_EQ(told.value, "AWS EFA (plugin)");
  EXPECT_EQ(told.verdict, "ok");
  EXPECT_EQ(told.note,
            "AWS EFA (2 devices) through the NCCL network plugin /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so: fast");
}

TEST(NetworkRows, EfaThroughAPluginOnTheLoadersPathIsFast) {
  FakeHost host;
  efa_host(host);
  host.write("/opt/rn50/nccl-plugin/libnccl-net.so", "");
  host.environment["LD_LIBRARY_PATH"] = "/opt/rn50/nccl-plugin";  // the image's
  ReportRow row = transport(host);
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note, "AWS EFA (2 devices) through the NCCL network plugin /opt/rn50/nccl-plugin/libnccl-net.so: fast");
  // Found through ld.so.conf's include as well.
  host.environment.erase("LD_LIBRARY_PATH");
  EXPECT_EQ(transport(host).verdict, "warn");
  host.write("/etc/ld.so.conf", "# the system's\ninclude /etc/ld.so.conf.d/*.conf\n");
  host.write("/etc/ld.so.conf.d/efa.conf", "/opt/rn50/nccl-plugin\n");
  host.write("/etc/ld.so.conf.d/efa.conf.disabled", "/nowhere\n");
  EXPECT_EQ(transport(host).verdict, "ok");
  // NCCL_NET_PLUGIN=none turns it off.
  host.environment["NCCL_NET_PLUGIN"] = "none";
  row = transport(host);
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_TRUE(has(row.note, "AWS EFA (2 devices) but NCCL_NET_PLUGIN=none turns network plugins off")) << row.note;
  // A plugin and EFA devices, but no device files in the container.
  host.environment.erase("NCCL_NET_PLUGIN");
  FakeHost container;
  for (const std::string name : {"rdmap16s27", "rdmap32s27"}) {
    rdma_device(container, name, "efa");
    rdma_port(container, name, 1, "4: ACTIVE", "Unknown", "100 Gb/sec");
  }
  container.libraries = host.libraries;
  container.write("/usr/lib/x86_64-linux-gnu/libnccl-net.so", "");
  row = transport(container);
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_TRUE(has(row.note, "but /dev/infiniband has no uverbs device")) << row.note;
}

TEST(NetworkRows, NcclNetForcesTheChoice) {
  FakeHost host;
  infiniband_host(host);
  host.environment["NCCL_NET"] = "Socket";
  ReportRow row = transport(host);
  EXPECT_EQ(row.value, "TCP sockets");
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_EQ(row.note,
            "NCCL_NET=Socket: TCP sockets although InfiniBand (mlx5_0 port 1 active, 400 Gb/s) could be used");
  host.environment["NCCL_NET"] = "IB";
  row = transport(host);
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note, "InfiniBand (mlx5_0 port 1 active, 400 Gb/s): fast (NCCL_NET=IB)");
  FakeHost plain;
  plain.environment["NCCL_NET"] = "ib";
  row = transport(plain);
  EXPECT_EQ(row.value, "none");
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_EQ(row.note, "NCCL_NET=IB, but no InfiniBand or RoCE device: NCCL fails to start");
  plain.environment["NCCL_NET"] = "Socket";
  EXPECT_EQ(transport(plain).verdict, "info");
  plain.environment["NCCL_NET"] = "AWS Libfabric";
  row = transport(plain);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note,
                  "NCCL_NET=AWS Libfabric is neither IB nor Socket, and no network plugin (libnccl-net.so) "
                  "is on the loader's path: NCCL fails to start"))
      << row.note;
}

TEST(NetworkRows, APluginBesideInfiniBandOrAloneOrNamedByNcclNet) {
  FakeHost host;
  infiniband_host(host);
  host.write("/usr/lib/x86_64-linux-gnu/libnccl-net.so", "");  // e.g. the SHARP plugin of an InfiniBand cluster
  ReportRow row = transport(host);
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note,
            "InfiniBand (mlx5_0 port 1 active, 400 Gb/s): fast (the NCCL network plugin "
            "/usr/lib/x86_64-linux-gnu/libnccl-net.so is tried first)");
  FakeHost alone;
  alone.write("/usr/lib/libnccl-net.so", "");
  row = transport(alone);
  EXPECT_EQ(row.verdict, "info");
  EXPECT_EQ(row.note,
            "the NCCL network plugin /usr/lib/libnccl-net.so finds no RDMA device here: TCP sockets, fine for one "
            "node, slow across nodes");
  // NCCL_NET_PLUGIN as a path, and NCCL_NET naming the plugin's network.
  FakeHost efa;
  efa_host(efa);
  efa.write("/opt/aws-ofi-nccl/lib/libnccl-net.so", "");
  efa.environment["NCCL_NET_PLUGIN"] = "/opt/aws-ofi-nccl/lib/libnccl-net.so";
  efa.environment["NCCL_NET"] = "AWS Libfabric";
  row = transport(efa);
  EXPECT_EQ(row.value, "network plugin");
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note,
            "NCCL_NET=AWS Libfabric: the NCCL network plugin /opt/aws-ofi-nccl/lib/libnccl-net.so, over AWS EFA (2 "
            "devices): fast");
  efa.environment["NCCL_NET"] = "Socket";
  row = transport(efa);
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_EQ(row.note, "NCCL_NET=Socket: TCP sockets although AWS EFA (2 devices) could be used");
}

TEST(NetworkRows, SettingsNcclCannotUseWarnInOneLineEach) {
  FakeHost host;
  infiniband_host(host);
  host.make_folder("/sys/class/net/eth0");
  host.make_folder("/sys/class/net/lo");
  host.environment["NCCL_SOCKET_IFNAME"] = "ib";
  host.environment["NCCL_IB_DISABLE"] = "yes";
  host.environment["NCCL_IB_HCA"] = "mlx5_9:1";
  const auto rows = rows_of(host);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].value, "NCCL_IB_DISABLE=yes NCCL_SOCKET_IFNAME=ib NCCL_IB_HCA=mlx5_9:1");
  EXPECT_EQ(rows[1].verdict, "warn");
  EXPECT_EQ(rows[1].note,
            "NCCL_IB_DISABLE=yes is not a number: 1 turns InfiniBand off, 0 keeps it; NCCL_SOCKET_IFNAME=ib selects "
            "none of eth0, lo here: NCCL finds no socket interface and fails to start; NCCL_IB_HCA=mlx5_9:1 selects "
            "none of mlx5_0 here: NCCL's InfiniBand transport finds no device");
  EXPECT_EQ(rows[1].note.find('\n'), std::string::npos);
  EXPECT_EQ(rows[0].verdict, "warn");  // NCCL_IB_HCA leaves no device to the transport
  EXPECT_TRUE(has(rows[0].note,
                  "InfiniBand device mlx5_0, but NCCL_IB_HCA=mlx5_9:1 selects none of them: NCCL would "
                  "fall back to TCP sockets"))
      << rows[0].note;
  // Lists NCCL accepts: a prefix, an exact name, an exclusion.
  for (const std::string ok : {"eth", "=eth0", "^docker,lo", "lo,eth"}) {
    host.environment = {{"NCCL_SOCKET_IFNAME", ok}};
    const auto fine = rows_of(host);
    ASSERT_EQ(fine.size(), 2u) << ok;
    EXPECT_EQ(fine[1].verdict, "info") << ok << ": " << fine[1].note;
  }
  host.environment = {{"NCCL_SOCKET_IFNAME", "=eth"}};  // exact: eth0 is not "eth"
  EXPECT_EQ(rows_of(host)[1].verdict, "warn");
  host.environment = {{"NCCL_IB_HCA", "=mlx5_0"}};
  EXPECT_EQ(rows_of(host)[1].verdict, "info");
  EXPECT_EQ(rows_of(host)[0].verdict, "ok");
}

}  // namespace
}  // namespace rn50::doctor
