package flowport.pipeline;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.DataSourceUtils;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.v2.FileDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Writes every fork branch of a task in one pass over its records.
 *
 * <p>The rows carry the branch bitmask as their last column ({@code fork.mask.column}); each row is
 * written by the sub-writer of every branch whose bit is set (a row with no bit set is skipped), in that branch's own format, to
 * {@code <task attempt dir>/<fork.branch.dir.N>/}. The sub-files live inside Spark's task attempt
 * directory, so the commit protocol publishes or discards them with the task, as it does for
 * partition folders: a failed or retried attempt leaves nothing behind.
 *
 * <p>Each task also writes {@code _fork_counts/<its file name>}: the rows it saw, then the rows each
 * branch got, space-separated (counting here costs far less than a Spark observation of the write).
 *
 * <p>Why: re-reading the source once per branch decodes it once per branch; this reads it once.
 *
 * <p>Options: {@code fork.branches} (N), {@code fork.mask.column}, and per branch i {@code
 * fork.branch.format.i} (a Spark file format name or class) and {@code fork.branch.dir.i}; an
 * option {@code fork.branch.option.i.KEY} is passed to branch i's format as {@code KEY}.
 */
public final class ForkFileFormat implements FileFormat, DataSourceRegister, Serializable {
  private static final long serialVersionUID = 1L;
  private static final String EXTENSION = ".fork";
  private static final String COUNTS_DIR = "_fork_counts";

  @Override
  public String shortName() {
    return "flowport-fork";
  }

  @Override
  public Option<StructType> inferSchema(
      SparkSession session, scala.collection.immutable.Map<String, String> options, Seq<FileStatus> files) {
    throw new UnsupportedOperationException("flowport-fork is a write-only format");
  }

  @Override
  public OutputWriterFactory prepareWrite(
      SparkSession session, Job job, scala.collection.immutable.Map<String, String> options, StructType dataSchema) {
    Map<String, String> opts = CollectionConverters.asJava(options);
    int branches = Integer.parseInt(required(opts, "fork.branches"));
    String mask = required(opts, "fork.mask.column");
    StructField[] fields = dataSchema.fields();
    if (fields.length < 2 || !fields[fields.length - 1].name().equals(mask)) {
      throw new IllegalArgumentException("flowport-fork: the last column must be " + mask);
    }
    StructField[] dataFields = java.util.Arrays.copyOf(fields, fields.length - 1);
    StructType branchSchema = new StructType(dataFields);
    List<OutputWriterFactory> factories = new ArrayList<>();
    List<SerializableConfiguration> confs = new ArrayList<>();
    List<String> dirs = new ArrayList<>();
    for (int i = 0; i < branches; i++) {
      String prefix = "fork.branch.option." + i + ".";
      Map<String, String> branchOptions = new HashMap<>();
      for (Map.Entry<String, String> e : opts.entrySet()) {
        if (e.getKey().startsWith(prefix)) {
          branchOptions.put(e.getKey().substring(prefix.length()), e.getValue());
        }
      }
      FileFormat format = fileFormat(required(opts, "fork.branch.format." + i));
      // The checks Spark makes of a format before writing: ours accepts anything, each branch may not.
      DataSourceUtils.verifySchema(format, branchSchema, false);
      DataSourceUtils.checkFieldNames(format, branchSchema);
      // Each branch prepares its own copy of the job configuration: two formats may set the same key.
      Job branchJob;
      try {
        branchJob = Job.getInstance(new Configuration(job.getConfiguration()));
      } catch (java.io.IOException e) {
        throw new IllegalStateException(e);
      }
      factories.add(format.prepareWrite(session, branchJob, scalaMap(branchOptions), branchSchema));
      confs.add(new SerializableConfiguration(branchJob.getConfiguration()));
      dirs.add(required(opts, "fork.branch.dir." + i));
    }
    return new Factory(factories, confs, dirs, branchSchema);
  }

  private static String required(Map<String, String> opts, String key) {
    String value = opts.get(key);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("flowport-fork: option " + key + " is required");
    }
    return value;
  }

  private static FileFormat fileFormat(String name) {
    Class<?> cls = org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
        name, org.apache.spark.sql.internal.SQLConf.get());
    try {
      Object instance = cls.getDeclaredConstructor().newInstance();
      if (instance instanceof FileDataSourceV2) {  // "parquet", "orc", ...: their V1 file format
        instance = ((FileDataSourceV2) instance).fallbackFileFormat().getDeclaredConstructor().newInstance();
      }
      if (!(instance instanceof FileFormat)) {
        throw new IllegalArgumentException("flowport-fork: " + name + " is not a file format");
      }
      return (FileFormat) instance;
    } catch (ReflectiveOperationException e) {
      throw new IllegalArgumentException("flowport-fork: cannot create format " + name, e);
    }
  }

  @SuppressWarnings("unchecked")
  private static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> map) {
    scala.collection.immutable.Map<String, String> result = scala.collection.immutable.Map$.MODULE$.empty();
    for (Map.Entry<String, String> e : map.entrySet()) {
      result = result.updated(e.getKey(), e.getValue());
    }
    return result;
  }

  private static final class Factory extends OutputWriterFactory {
    private static final long serialVersionUID = 1L;
    private final List<OutputWriterFactory> factories;
    private final List<SerializableConfiguration> confs;
    private final List<String> dirs;
    private final StructType branchSchema;

    Factory(List<OutputWriterFactory> factories, List<SerializableConfiguration> confs, List<String> dirs,
        StructType branchSchema) {
      this.factories = factories;
      this.confs = confs;
      this.dirs = dirs;
      this.branchSchema = branchSchema;
    }

    @Override
    public String getFileExtension(TaskAttemptContext context) {
      return EXTENSION;
    }

    @Override
    public OutputWriter newInstance(String path, StructType dataSchema, TaskAttemptContext context) {
      return new Writer(this, path, context);
    }
  }

  /**
   * One task's writer: opens a branch's file on its first row. The task of partition 0 also opens the
   * branches that got no row when it closes, so every branch has at least one file with its schema,
   * as a write of its own would.
   */
  private static final class Writer extends OutputWriter {
    private final Factory factory;
    private final String path;
    private final TaskAttemptContext context;
    private final OutputWriter[] writers;
    private final UnsafeProjection project;
    private final int maskOrdinal;
    private final long[] written;
    private long seen;

    Writer(Factory factory, String path, TaskAttemptContext context) {
      this.factory = factory;
      this.path = path;
      this.context = context;
      this.writers = new OutputWriter[factory.factories.size()];
      StructField[] fields = factory.branchSchema.fields();
      DataType[] types = new DataType[fields.length];
      for (int i = 0; i < fields.length; i++) {
        types[i] = fields[i].dataType();
      }
      this.project = UnsafeProjection.create(types);
      this.maskOrdinal = fields.length;
      this.written = new long[writers.length];
    }

    @Override
    public void write(InternalRow row) {
      seen++;
      long mask = row.getLong(maskOrdinal);
      if (mask == 0) {
        return;
      }
      InternalRow data = project.apply(row);
      for (int i = 0; mask != 0; i++, mask >>>= 1) {
        if ((mask & 1L) != 0) {
          writer(i).write(data);
          written[i]++;
        }
      }
    }

    private OutputWriter writer(int i) {
      if (writers[i] == null) {
        Path file = new Path(path);
        String stem = file.getName().substring(0, file.getName().length() - EXTENSION.length());
        TaskAttemptContext branchContext =
            new TaskAttemptContextImpl(factory.confs.get(i).value(), context.getTaskAttemptID());
        OutputWriterFactory sub = factory.factories.get(i);
        // The branch index keeps names unique when branches publish to the same folder.
        Path target = new Path(new Path(file.getParent(), factory.dirs.get(i)),
            stem + "-b" + i + sub.getFileExtension(branchContext));
        writers[i] = sub.newInstance(target.toString(), factory.branchSchema, branchContext);
      }
      return writers[i];
    }

    @Override
    public void close() {
      Throwable failure = null;
      try {
        if (context.getTaskAttemptID().getTaskID().getId() == 0) {
          for (int i = 0; i < writers.length; i++) {
            writer(i);
          }
        }
      } catch (Throwable e) {
        failure = e;
      }
      for (int i = 0; i < writers.length; i++) {
        if (writers[i] != null) {
          try {
            writers[i].close();
          } catch (Throwable e) {  // close every branch's writer, whatever one of them throws
            if (failure == null) {
              failure = e;
            } else {
              failure.addSuppressed(e);
            }
          }
          writers[i] = null;
        }
      }
      if (failure == null) {
        // Spark's write statistics expect the file it named: leave it, empty (the caller ignores it).
        // The counts go beside it, so only a committed task's rows are counted.
        try {
          Path file = new Path(path);
          org.apache.hadoop.fs.FileSystem fs = file.getFileSystem(context.getConfiguration());
          fs.create(file, true).close();
          StringBuilder counts = new StringBuilder().append(seen);
          for (long n : written) {
            counts.append(' ').append(n);
          }
          Path countsFile = new Path(new Path(file.getParent(), COUNTS_DIR), file.getName());
          try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(countsFile, true)) {
            out.write(counts.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
          }
        } catch (java.io.IOException e) {
          failure = e;
        }
      }
      if (failure instanceof RuntimeException) {
        throw (RuntimeException) failure;
      } else if (failure instanceof Error) {
        throw (Error) failure;
      } else if (failure != null) {
        throw new IllegalStateException("flowport-fork: closing the branch writers failed", failure);
      }
    }

    @Override
    public String path() {
      return path;
    }
  }
}
