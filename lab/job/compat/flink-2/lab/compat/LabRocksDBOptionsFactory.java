package lab.compat;

import org.apache.flink.state.rocksdb.ConfigurableRocksDBOptionsFactory;

/** Flink 2.x: the RocksDB state backend lives in org.apache.flink.state.rocksdb. */
public interface LabRocksDBOptionsFactory extends ConfigurableRocksDBOptionsFactory {}
