package lab.compat;

import org.apache.flink.contrib.streaming.state.ConfigurableRocksDBOptionsFactory;

/** Flink 1.x: the RocksDB state backend lives in org.apache.flink.contrib.streaming.state. */
public interface LabRocksDBOptionsFactory extends ConfigurableRocksDBOptionsFactory {}
